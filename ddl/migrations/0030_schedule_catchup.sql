-- Catch-up of every missed interval (issue 33). A schedule's `catchup` is `latest` (the
-- default: the fires missed while the coordinator was down coalesce into one run, for the
-- latest) or `all`: every missed interval runs, in order, through a backfill of the
-- schedule's intervals (service/domain/catchup.py). Such a backfill names its schedule
-- (`schedule_id`, no foreign key: schedules are soft-deleted and the backfill outlives
-- nothing it needs) and the interval's length (`interval_s`); its values are the fire
-- times (`interval_end`, ISO 8601 UTC) and each value's run gets the interval built-ins
-- (`logical_date`, `interval_start`, `interval_end`) instead of a declared parameter.
-- `schedules.last_backfill_id`: the backfill that caught up the fires up to `last_fired_at`.
ALTER TABLE schedules ADD COLUMN catchup text NOT NULL DEFAULT 'latest'
    CHECK (catchup IN ('latest', 'all'));
ALTER TABLE schedules ADD COLUMN last_backfill_id uuid;
ALTER TABLE backfills ADD COLUMN schedule_id uuid;
ALTER TABLE backfills ADD COLUMN interval_s integer CHECK (interval_s > 0);
ALTER TABLE backfills ADD CONSTRAINT backfills_interval_of_schedule
    CHECK ((schedule_id IS NULL) = (interval_s IS NULL));
