-- File-arrival schedules (issue 34, item 1): a schedule may watch a glob under ETL_DATA_DIR
-- (`watch`) instead of firing on the clock; it has no fire time then (`next_fire_at` NULL).
-- The coordinator's watcher (service/watcher.py) records each settled file it finds in
-- `watched_files`, pending until a run of it is admitted (service/domain/watches.py).
ALTER TABLE schedules ADD COLUMN watch text
    CHECK (watch IS NULL OR (length(watch) BETWEEN 1 AND 1024));
ALTER TABLE schedules ALTER COLUMN next_fire_at DROP NOT NULL;
ALTER TABLE schedules DROP CONSTRAINT schedules_check;
ALTER TABLE schedules ADD CONSTRAINT schedules_one_kind CHECK (
    (every_minutes IS NOT NULL)::int + (daily_at IS NOT NULL)::int + (watch IS NOT NULL)::int = 1
    AND ((watch IS NULL) = (next_fire_at IS NOT NULL)));

-- One row per file of a pipeline ever found settled, by its identity: the path relative to
-- ETL_DATA_DIR and the SHA-256 of its content. A restart, a second coordinator or a
-- re-created schedule finds the row and records nothing again; a changed content is another
-- row. `run_id` NULL: pending (waiting for room); the admission sets it in the run's
-- transaction. `schedule_id`: the live schedule that admits it (a re-created schedule that
-- finds a file still pending takes it over). `seq` orders the admissions: files found in one
-- pass are numbered in name order.
CREATE TABLE watched_files (
    seq          bigserial PRIMARY KEY,
    pipeline_id  uuid NOT NULL REFERENCES pipelines (id) ON DELETE CASCADE,
    schedule_id  uuid NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    path         text NOT NULL,
    digest       text NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
    size         bigint NOT NULL,
    found_at     timestamptz NOT NULL DEFAULT now(),
    run_id       uuid REFERENCES runs (id) ON DELETE SET NULL,
    admitted_at  timestamptz,
    UNIQUE (pipeline_id, path, digest)
);
-- The admission pass reads only the pending files.
CREATE INDEX watched_files_pending ON watched_files (schedule_id, seq) WHERE admitted_at IS NULL;
