-- Queries of file-arrival schedules (service/domain/watches.py, service/watcher.py): the
-- live watch schedules, the settled files they find, and the admission of pending files.

-- list_live_watches --
-- Every live watch schedule of a live pipeline, oldest first (what the watcher polls).
SELECT s.id, s.pipeline_id, s.watch
FROM schedules s JOIN pipelines p ON p.id = s.pipeline_id AND p.deleted_at IS NULL
WHERE s.deleted_at IS NULL AND s.watch IS NOT NULL
ORDER BY s.created_at, s.id;

-- record_files --
-- Settled files found by a live schedule, in name order: a file already known to the
-- pipeline (same path, same content digest) records nothing, except that a pending one is
-- taken over by this schedule (a re-created schedule admits what its predecessor left).
-- Returns the rows inserted or taken over.
INSERT INTO watched_files (pipeline_id, schedule_id, path, digest, size)
SELECT s.pipeline_id, s.id, f.path, f.digest, f.size
FROM schedules s
CROSS JOIN unnest(%(paths)s::text[], %(digests)s::text[], %(sizes)s::bigint[])
    WITH ORDINALITY AS f (path, digest, size, position)
WHERE s.id = %(schedule_id)s AND s.deleted_at IS NULL
ORDER BY f.position
ON CONFLICT (pipeline_id, path, digest) DO UPDATE SET schedule_id = EXCLUDED.schedule_id
    WHERE watched_files.admitted_at IS NULL AND watched_files.schedule_id <> EXCLUDED.schedule_id
RETURNING seq, path;

-- list_waiting_watches --
-- Live watch schedules with a pending file, with their pipeline's room (read under the
-- admission lock): its active runs, those of them admitted for backfills or watched files
-- (they share `BACKFILL_ACTIVE_LIMIT`), and whether it is paused.
SELECT s.id, s.pipeline_id, p.paused, a.active, a.waiting
FROM schedules s JOIN pipelines p ON p.id = s.pipeline_id
CROSS JOIN LATERAL (
    SELECT count(*) AS active,
           count(*) FILTER (WHERE r.trigger_key LIKE 'backfill:%%'
                               OR r.trigger_key LIKE 'watch:%%') AS waiting
    FROM runs r
    WHERE r.pipeline_id = s.pipeline_id AND r.status IN ('queued', 'running')) a
WHERE s.deleted_at IS NULL AND s.watch IS NOT NULL AND p.deleted_at IS NULL
  AND EXISTS (SELECT 1 FROM watched_files w
              WHERE w.schedule_id = s.id AND w.admitted_at IS NULL)
ORDER BY (SELECT min(w.seq) FROM watched_files w
          WHERE w.schedule_id = s.id AND w.admitted_at IS NULL);

-- next_pending_files --
-- The oldest pending files of a schedule.
SELECT seq, path, digest FROM watched_files
WHERE schedule_id = %(schedule_id)s AND admitted_at IS NULL
ORDER BY seq LIMIT %(limit)s;

-- set_file_run --
-- The run a pending file's admission made.
UPDATE watched_files SET run_id = %(run_id)s, admitted_at = now()
WHERE seq = %(seq)s AND admitted_at IS NULL;

-- record_watch_run --
-- The newest run a watch schedule admitted (what lists and the console show as its last).
UPDATE schedules SET last_fired_at = now(), last_run_id = %(run_id)s
WHERE id = %(schedule_id)s;

-- count_pending_files --
-- Files of a schedule waiting for room.
SELECT count(*) AS pending FROM watched_files
WHERE schedule_id = %(schedule_id)s AND admitted_at IS NULL;
