-- Backfills (issue 33): one planned run per value of a parameter's range, admitted in
-- ascending order through the same admission as any trigger while the pipeline has room,
-- waiting otherwise (service/domain/backfills.py). A value is pending while `run_id` is
-- NULL; the run that admits it sets `run_id` in the admission's transaction, and its trigger
-- key `backfill:<id>:<value>` is unique per pipeline, so a restart loses no value and admits
-- none twice. `canceled_at`: the pending values were dropped (and the runs canceled).
CREATE TABLE backfills (
    id           uuid PRIMARY KEY,
    pipeline_id  uuid NOT NULL REFERENCES pipelines (id) ON DELETE CASCADE,
    param        text NOT NULL,
    value_from   jsonb NOT NULL,
    value_to     jsonb NOT NULL,
    total        integer NOT NULL CHECK (total > 0),
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    canceled_at  timestamptz
);
CREATE INDEX backfills_pipeline ON backfills (pipeline_id, created_at);

CREATE TABLE backfill_values (
    backfill_id  uuid NOT NULL REFERENCES backfills (id) ON DELETE CASCADE,
    position     integer NOT NULL,               -- 0-based, ascending values
    value        jsonb NOT NULL,
    run_id       uuid REFERENCES runs (id),
    PRIMARY KEY (backfill_id, position)
);
-- The admission pass reads only the pending values of live backfills.
CREATE INDEX backfill_values_pending ON backfill_values (backfill_id, position)
    WHERE run_id IS NULL;
