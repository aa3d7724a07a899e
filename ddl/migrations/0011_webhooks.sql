-- Notifications on run end (issue 22, item 6): a pipeline's webhooks, and an outbox of their
-- deliveries written in the very transaction that ends a run, so no path that ends a run can
-- forget one and no coordinator crash can lose one (service/notifier.py delivers them).

CREATE TABLE webhooks (
    id          uuid PRIMARY KEY,
    pipeline_id uuid NOT NULL REFERENCES pipelines (id) ON DELETE CASCADE,
    url         text NOT NULL,
    events      text[] NOT NULL CHECK (cardinality(events) >= 1
                AND events <@ ARRAY['run.failed', 'run.succeeded', 'run.skipped']),
    secret      text NOT NULL,                 -- the HMAC key: the receiver has it too
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz                    -- deleted: nothing more is sent to it
);
CREATE INDEX webhooks_live ON webhooks (pipeline_id, created_at) WHERE deleted_at IS NULL;

-- One row per (event, webhook): the event id a receiver deduplicates on, the run summary
-- as it was when the run ended, the exact body (built once, before the first attempt, so
-- every retry sends the same bytes and signature) and the delivery's progress.
CREATE TABLE webhook_deliveries (
    id               bigserial PRIMARY KEY,
    event_id         uuid NOT NULL UNIQUE,
    webhook_id       uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    run_id           uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    event            text NOT NULL CHECK (event IN ('run.failed', 'run.succeeded', 'run.skipped')),
    run              jsonb NOT NULL,
    body             text,
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'delivered', 'failed', 'canceled')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_attempt_at  timestamptz,
    last_status_code integer,                  -- the receiver's HTTP status, if it answered
    last_error       text,
    delivered_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, id);

-- A timestamp as the REST API writes one: ISO-8601 UTC with microseconds and a Z.
CREATE FUNCTION webhook_utc_text(at timestamptz) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- The run as an item of `GET /api/v1/runs` shows it (service/domain/sql/listing.sql,
-- `list_run_summaries`, and service/domain/listing.py): the body's "run".
CREATE FUNCTION webhook_run_summary(the_run uuid) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', r.id, 'pipeline_id', r.pipeline_id, 'pipeline_name', p.name,
        'revision', r.revision, 'status', r.status, 'reason', r.reason,
        'trigger_key', r.trigger_key, 'trace_id', r.trace_id,
        'cancel_requested', r.cancel_requested, 'created_by', r.created_by,
        'created_at', webhook_utc_text(r.created_at),
        'started_at', webhook_utc_text(r.started_at),
        'finished_at', webhook_utc_text(r.finished_at),
        'purged_at', webhook_utc_text(r.purged_at),
        'queue_position', NULL,  -- an ended run is in no queue
        'steps', coalesce(sc.steps, pv.steps),
        'step_counts', coalesce(sc.step_counts, CASE WHEN pv.steps > 0
            THEN jsonb_build_object('not_run', pv.steps) ELSE '{}'::jsonb END),
        'records_out', coalesce(sc.records_out, 0),
        'rejected', coalesce(sc.rejected, 0),
        'error', (SELECT 'step ' || f.name || ': ' || f.error FROM step_runs f
                  WHERE f.run_id = r.id AND f.status = 'failed'
                  ORDER BY f.position LIMIT 1))
    FROM runs r
    JOIN pipelines p ON p.id = r.pipeline_id
    JOIN revisions v ON v.pipeline_id = r.pipeline_id AND v.number = r.revision
    -- a revision that no longer validates (written by hand) may have no list of steps
    CROSS JOIN LATERAL (
        SELECT CASE WHEN jsonb_typeof(v.plan -> 'steps') = 'array'
                    THEN jsonb_array_length(v.plan -> 'steps') ELSE 0 END AS steps) pv
    LEFT JOIN LATERAL (
        SELECT jsonb_object_agg(c.status, c.n) AS step_counts, sum(c.n)::integer AS steps,
               sum(c.records_out)::bigint AS records_out, sum(c.rejected)::bigint AS rejected
        FROM (SELECT s.status, count(*) AS n, sum(s.records_out) AS records_out,
                     sum(s.rejected) AS rejected
              FROM step_runs s WHERE s.run_id = r.id GROUP BY s.status) c
        HAVING count(*) > 0) sc ON true
    WHERE r.id = the_run
$$;

-- When a run reaches succeeded, failed or skipped: one delivery per live webhook of its
-- pipeline that asked for the event, and a wake-up of the notifier. A constraint trigger
-- deferred to COMMIT: the summary sees every step's final counters whatever order the
-- statements of the ending transaction ran in, and the rows commit with the run's status
-- or not at all. A canceled run sends nothing (no such event).
CREATE FUNCTION webhook_enqueue_run_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ended text := 'run.' || NEW.status;
    summary jsonb;
    queued integer;
BEGIN
    IF NEW.status NOT IN ('succeeded', 'failed', 'skipped')
       OR NOT EXISTS (SELECT 1 FROM webhooks w
                      WHERE w.pipeline_id = NEW.pipeline_id AND w.deleted_at IS NULL
                        AND ended = ANY(w.events)) THEN
        RETURN NULL;
    END IF;
    -- Never let a summary that cannot be built stop the run from ending: send the facts.
    BEGIN
        summary := webhook_run_summary(NEW.id);
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'webhook summary of run %: %', NEW.id, SQLERRM;
    END;
    summary := coalesce(summary, jsonb_build_object(
        'id', NEW.id, 'pipeline_id', NEW.pipeline_id, 'status', NEW.status,
        'reason', NEW.reason, 'trace_id', NEW.trace_id));
    INSERT INTO webhook_deliveries (event_id, webhook_id, run_id, event, run)
    SELECT gen_random_uuid(), w.id, NEW.id, ended, summary
    FROM webhooks w
    WHERE w.pipeline_id = NEW.pipeline_id AND w.deleted_at IS NULL AND ended = ANY(w.events);
    GET DIAGNOSTICS queued = ROW_COUNT;
    IF queued > 0 THEN
        PERFORM pg_notify('etl_webhooks', '');
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER runs_ended_notify AFTER UPDATE OF status ON runs
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION webhook_enqueue_run_event();
CREATE CONSTRAINT TRIGGER runs_skipped_notify AFTER INSERT ON runs
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.status = 'skipped')
    EXECUTE FUNCTION webhook_enqueue_run_event();
