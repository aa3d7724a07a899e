-- Incremental table ingest (issue 34): the high-water mark of each cursor ingest of a
-- pipeline, and the range each run's step reads, fixed when the step first starts.
--
-- A mark is the highest cursor value (its PostgreSQL text form) a succeeded run read, with
-- the sandbox snapshot (`pg_snapshot` text) its range was bounded by: a row at or below the
-- value that this snapshot did not see was committed late and is read by the next run.
-- `version` comes from a sequence so that a run advances the mark only if it is still the
-- one the run started from (an admin's reset or set meanwhile wins).
CREATE SEQUENCE cursor_mark_versions;

CREATE TABLE cursor_marks (
    pipeline_id uuid NOT NULL REFERENCES pipelines (id) ON DELETE CASCADE,
    step_name   text NOT NULL,
    table_name  text NOT NULL,
    column_name text NOT NULL,
    value       text,               -- NULL: no row read yet
    snapshot    text,               -- NULL: set by an admin (no late-row pick-up below it)
    version     bigint NOT NULL DEFAULT nextval('cursor_mark_versions'),
    run_id      uuid,               -- the run that set it; NULL when an admin did
    updated_by  text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pipeline_id, step_name)
);

CREATE TABLE step_cursor_ranges (
    run_id         uuid NOT NULL,
    step_name      text NOT NULL,
    table_name     text NOT NULL,
    column_name    text NOT NULL,
    lower_value    text,            -- the mark the step started from (NULL: the start)
    lower_snapshot text,            -- that mark's snapshot
    mark_version   bigint,          -- that mark's version (NULL: there was none)
    upper_value    text,            -- the highest cursor value in `snapshot`
    snapshot       text NOT NULL,   -- the sandbox snapshot bounding the range
    late_rows      bigint NOT NULL DEFAULT 0, -- rows it reads that are not above the mark
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step_name),
    FOREIGN KEY (run_id, step_name) REFERENCES step_runs (run_id, name) ON DELETE CASCADE
);
