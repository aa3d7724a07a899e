-- Coordinator state: pipelines, immutable revisions, runs, step runs, attempts with leases,
-- committed step output batches, schedules, principals and the audit trail.

CREATE TABLE principals (
    id          uuid PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    role        text NOT NULL CHECK (role IN ('pipeline_admin', 'pipeline_operator', 'pipeline_viewer')),
    token_hash  text NOT NULL UNIQUE,           -- sha256 hex of the token; the token itself is never stored
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE pipelines (
    id          uuid PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    revision    integer NOT NULL CHECK (revision >= 1),   -- current revision number
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE revisions (
    pipeline_id uuid NOT NULL REFERENCES pipelines (id) ON DELETE CASCADE,
    number      integer NOT NULL CHECK (number >= 1),
    plan        jsonb NOT NULL,
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pipeline_id, number)
);

-- Revisions are immutable: a run's snapshot never changes under it.
CREATE FUNCTION forbid_revision_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'revisions are immutable';
END $$;
CREATE TRIGGER revisions_immutable BEFORE UPDATE ON revisions
    FOR EACH ROW EXECUTE FUNCTION forbid_revision_update();

CREATE SEQUENCE run_queue_seq;

CREATE TABLE runs (
    id               uuid PRIMARY KEY,
    pipeline_id      uuid NOT NULL REFERENCES pipelines (id) ON DELETE CASCADE,
    revision         integer NOT NULL,
    status           text NOT NULL CHECK (status IN
                     ('queued', 'running', 'succeeded', 'failed', 'canceled', 'skipped')),
    reason           text CHECK (reason IS NULL OR reason IN ('queue_full', 'busy')),
    trigger_key      text NOT NULL,
    trace_id         text NOT NULL,
    queue_seq        bigint NOT NULL DEFAULT nextval('run_queue_seq'),  -- FIFO order
    cancel_requested boolean NOT NULL DEFAULT false,
    created_by       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    UNIQUE (pipeline_id, trigger_key),
    FOREIGN KEY (pipeline_id, revision) REFERENCES revisions (pipeline_id, number),
    CHECK ((status = 'skipped') = (reason IS NOT NULL))
);
CREATE INDEX runs_active ON runs (pipeline_id, queue_seq) WHERE status IN ('queued', 'running');
CREATE INDEX runs_pipeline ON runs (pipeline_id, created_at);

CREATE TABLE step_runs (
    run_id        uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name          text NOT NULL,
    type          text NOT NULL CHECK (type IN ('ingest', 'transform', 'export')),
    position      integer NOT NULL,                 -- index in the plan
    status        text NOT NULL DEFAULT 'pending' CHECK (status IN
                  ('pending', 'running', 'retry_wait', 'succeeded', 'failed',
                   'upstream_failed', 'not_run', 'canceled')),
    retry_at      timestamptz,                      -- when a retry_wait step may start again
    records_in    bigint NOT NULL DEFAULT 0,
    records_out   bigint NOT NULL DEFAULT 0,
    rejected      bigint NOT NULL DEFAULT 0,
    columns       jsonb,                            -- [[name, type], ...] in output order
    input_digest  text,
    output_digest text,
    checkpoint    jsonb,                            -- input position + running state; null = start
    batches       integer NOT NULL DEFAULT 0,       -- committed output batches
    row_errors    jsonb NOT NULL DEFAULT '[]',      -- the first 20 row errors
    error         text,
    started_at    timestamptz,
    finished_at   timestamptz,
    PRIMARY KEY (run_id, name)
);

CREATE TABLE attempts (
    id               bigserial PRIMARY KEY,
    run_id           uuid NOT NULL,
    step_name        text NOT NULL,
    number           integer NOT NULL CHECK (number >= 1),
    executor         text,                         -- executor name:boot id that ran it last
    lease_owner      text,
    lease_expires_at timestamptz,
    heartbeat_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    outcome          text CHECK (outcome IS NULL OR outcome IN
                     ('succeeded', 'failed', 'input_error', 'timeout', 'lease_expired',
                      'canceled', 'superseded')),
    error            text,
    batches_done     integer NOT NULL DEFAULT 0,   -- batches this attempt committed
    UNIQUE (run_id, step_name, number),
    FOREIGN KEY (run_id, step_name) REFERENCES step_runs (run_id, name) ON DELETE CASCADE
);
CREATE INDEX attempts_live ON attempts (lease_expires_at) WHERE outcome IS NULL;

-- Committed output of a step: one row per input batch, compressed JSON (about twice as fast
-- to write as jsonb; see actors/outputs.py).
CREATE TABLE step_batches (
    run_id    uuid NOT NULL,
    step_name text NOT NULL,
    seq       integer NOT NULL,
    records   integer NOT NULL,
    payload   bytea NOT NULL,
    PRIMARY KEY (run_id, step_name, seq),
    FOREIGN KEY (run_id, step_name) REFERENCES step_runs (run_id, name) ON DELETE CASCADE
);

CREATE TABLE schedules (
    id            uuid PRIMARY KEY,
    pipeline_id   uuid NOT NULL REFERENCES pipelines (id) ON DELETE CASCADE,
    every_minutes integer CHECK (every_minutes BETWEEN 5 AND 1440),
    daily_at      text CHECK (daily_at ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'),
    anchor_at     timestamptz NOT NULL DEFAULT now(),   -- interval schedules count from here
    next_fire_at  timestamptz NOT NULL,
    last_fired_at timestamptz,
    last_run_id   uuid,
    created_by    text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    CHECK ((every_minutes IS NULL) <> (daily_at IS NULL))
);

CREATE TABLE audit (
    id          bigserial PRIMARY KEY,
    principal   text NOT NULL,
    action      text NOT NULL,
    entity_type text NOT NULL,
    entity_id   text NOT NULL,
    details     jsonb NOT NULL DEFAULT '{}',
    trace_id    text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
