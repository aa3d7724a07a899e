-- Queries of backfills (service/domain/backfills.py): creation, the admission pass over
-- pending values, the view and cancel.

-- insert_backfill --
-- A new backfill of a parameter's range.
INSERT INTO backfills (id, pipeline_id, param, value_from, value_to, total, created_by,
                       schedule_id, interval_s)
VALUES (%(id)s, %(pipeline_id)s, %(param)s, %(value_from)s, %(value_to)s, %(total)s,
        %(created_by)s, %(schedule_id)s, %(interval_s)s);

-- insert_backfill_values --
-- Its values, ascending, all pending.
INSERT INTO backfill_values (backfill_id, position, value)
SELECT %(backfill_id)s, t.position - 1, t.value
FROM unnest(%(values)s::jsonb[]) WITH ORDINALITY AS t (value, position);

-- get_backfill --
-- One backfill with its counters (a canceled backfill has no pending value).
SELECT b.id, b.pipeline_id, b.param, b.value_from, b.value_to, b.total, b.created_by,
       b.created_at, b.canceled_at, b.schedule_id,
       count(*) FILTER (WHERE r.status = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE r.status IN ('failed', 'canceled', 'skipped')) AS failed,
       count(*) FILTER (WHERE v.run_id IS NULL AND b.canceled_at IS NULL) AS pending,
       count(*) FILTER (WHERE r.status IN ('queued', 'running')) AS active
FROM backfills b
JOIN backfill_values v ON v.backfill_id = b.id
LEFT JOIN runs r ON r.id = v.run_id
WHERE b.id = %(backfill_id)s
GROUP BY b.id;

-- list_backfill_runs --
-- Each value of a backfill with its run's id and status, ascending.
SELECT v.value, v.run_id, r.status
FROM backfill_values v LEFT JOIN runs r ON r.id = v.run_id
WHERE v.backfill_id = %(backfill_id)s
ORDER BY v.position;

-- lock_backfill --
-- Lock a backfill for cancel.
SELECT id, pipeline_id, canceled_at FROM backfills WHERE id = %(backfill_id)s FOR UPDATE;

-- cancel_backfill --
-- Drop a backfill's pending values: none is admitted after this.
UPDATE backfills SET canceled_at = now() WHERE id = %(backfill_id)s AND canceled_at IS NULL;

-- list_backfill_active_runs --
-- The queued or running runs of a backfill (what a cancel cancels).
SELECT r.id FROM backfill_values v JOIN runs r ON r.id = v.run_id
WHERE v.backfill_id = %(backfill_id)s AND r.status IN ('queued', 'running')
ORDER BY v.position;

-- list_waiting_backfills --
-- Live backfills with a pending value, oldest first, with their pipeline's room: its active
-- runs, those of them that backfills or watched files admitted (they share
-- `BACKFILL_ACTIVE_LIMIT`, service/domain/watches.py), whether it is paused, the platform's
-- active runs, and the backfill's lowest pending values (at most %(per_backfill)s: positions
-- and values, ascending). Read under the admission lock: one statement for the whole pass.
SELECT b.id, b.pipeline_id, b.param, b.interval_s, p.paused, a.active, a.backfilling,
       g.total_active, n.positions, n.values
FROM backfills b JOIN pipelines p ON p.id = b.pipeline_id
CROSS JOIN (SELECT count(*) AS total_active FROM runs
            WHERE status IN ('queued', 'running')) g
CROSS JOIN LATERAL (
    SELECT count(*) AS active,
           count(*) FILTER (WHERE r.trigger_key LIKE 'backfill:%%'
                               OR r.trigger_key LIKE 'watch:%%') AS backfilling
    FROM runs r
    WHERE r.pipeline_id = b.pipeline_id AND r.status IN ('queued', 'running')) a
CROSS JOIN LATERAL (
    SELECT array_agg(v.position ORDER BY v.position) AS positions,
           jsonb_agg(v.value ORDER BY v.position) AS values
    FROM (SELECT position, value FROM backfill_values
          WHERE backfill_id = b.id AND run_id IS NULL
          ORDER BY position LIMIT %(per_backfill)s) v) n
WHERE b.canceled_at IS NULL AND p.deleted_at IS NULL AND n.positions IS NOT NULL
ORDER BY b.created_at, b.id;

-- set_backfill_runs --
-- The runs the admissions of a backfill's pending values made (positions[i] -> run_ids[i]).
UPDATE backfill_values v SET run_id = t.run_id
FROM unnest(%(positions)s::integer[], %(run_ids)s::uuid[]) AS t (position, run_id)
WHERE v.backfill_id = %(backfill_id)s AND v.position = t.position AND v.run_id IS NULL;

-- commit_asynchronously --
-- This transaction of the backfiller commits without waiting for the WAL flush
-- (service/backfiller.py).
SET LOCAL synchronous_commit = off;

-- count_all_active_runs --
-- Runs holding a slot (queued or running) on the whole platform (the watcher's pass).
SELECT count(*) AS active FROM runs WHERE status IN ('queued', 'running');
