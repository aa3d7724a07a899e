-- Named queries of the scheduler (service/scheduler.py, service/domain/schedules.py). The
-- schedules table lives in ddl/migrations/0001_state.sql; the API inserts and soft-deletes
-- rows (service/domain/sql/queries.sql),
-- the scheduler reads them and records fires. Fire times come from the injected clock, in UTC.

-- list_live_schedules --
-- Every schedule that has not been deleted, of a pipeline that has not been deleted: what
-- the scheduler should have as jobs (an orphan never makes a catch-up fire a NotFound).
-- Watch schedules have no fire time: the watcher follows them (watches.sql).
SELECT s.id, s.pipeline_id, s.every_minutes, s.daily_at, s.anchor_at, s.next_fire_at,
       s.last_fired_at, s.catchup
FROM schedules s JOIN pipelines p ON p.id = s.pipeline_id AND p.deleted_at IS NULL
WHERE s.deleted_at IS NULL AND s.watch IS NULL
ORDER BY s.created_at, s.id;

-- lock_schedule --
-- Lock one schedule row for a fire, so a concurrent DELETE either wins before it or waits.
SELECT id, pipeline_id, every_minutes, daily_at, anchor_at, next_fire_at, last_fired_at,
       last_run_id, last_skip_reason, deleted_at, catchup, last_backfill_id
FROM schedules
WHERE id = %(schedule_id)s
FOR NO KEY UPDATE;

-- record_schedule_fire --
-- After a fire: the newest fire time and its run, the reason it made none, or the catch-up
-- backfill that holds it, win (a late
-- duplicate of an older fire never moves them back); next_fire_at is the next fire after
-- the fire and the clock.
UPDATE schedules
SET last_run_id = CASE WHEN last_fired_at IS NULL OR last_fired_at <= %(fired_at)s
                       THEN %(run_id)s ELSE last_run_id END,
    last_skip_reason = CASE WHEN last_fired_at IS NULL OR last_fired_at <= %(fired_at)s
                            THEN %(skip_reason)s ELSE last_skip_reason END,
    last_backfill_id = CASE WHEN last_fired_at IS NULL OR last_fired_at <= %(fired_at)s
                            THEN %(backfill_id)s ELSE last_backfill_id END,
    last_fired_at = GREATEST(last_fired_at, %(fired_at)s),
    next_fire_at = %(next_fire_at)s
WHERE id = %(schedule_id)s
RETURNING next_fire_at, last_fired_at, last_run_id, last_skip_reason;
