-- Named queries of GET /metrics (service/domain/metrics.py). Counters, histograms and
-- last-success/failure times are read from `metric_totals` plus the deltas not folded yet
-- (migration 0009: written by triggers in the transactions that change state), so a scrape
-- reads tables the size of the label sets, whatever the history. Gauges of the present
-- (queue depth, running runs, leases, executors) read the live rows through partial indexes.

-- begin_metrics_snapshot --
-- Read every metric of one scrape from one consistent snapshot.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;

-- read_metric_samples --
-- Every kept sample: the folded totals plus the deltas appended since the last fold; a
-- histogram bucket's `le` apart from its other labels, the rows of one series together.
SELECT family, labels - 'le' AS labels, labels -> 'le' AS le, value
FROM (SELECT family, labels,
             CASE WHEN right(family, 18) = '_timestamp_seconds' THEN max(value)
                  ELSE sum(value) END AS value
      FROM (SELECT family, labels, value FROM metric_totals
            UNION ALL
            SELECT family, labels, value FROM metric_deltas) m
      GROUP BY family, labels) s
ORDER BY family, labels - 'le';

-- duration_bounds --
-- The bounds (seconds) of the duration histograms, as the triggers bucket them.
SELECT metric_duration_bounds() AS bounds;

-- count_live_runs_by_pipeline --
-- Queued and running runs of every pipeline not deleted (0 for a pipeline with none).
SELECT p.name AS pipeline,
       count(r.id) FILTER (WHERE r.status = 'queued') AS queued,
       count(r.id) FILTER (WHERE r.status = 'running') AS running
FROM pipelines p LEFT JOIN runs r ON r.pipeline_id = p.id AND r.status IN ('queued', 'running')
WHERE p.deleted_at IS NULL
GROUP BY p.name;

-- count_active_leases_by_executor --
-- Unfinished attempts whose lease is live, by executor name (the owner without its boot id).
SELECT split_part(lease_owner, ':', 1) AS executor, count(*) AS n
FROM attempts
WHERE outcome IS NULL AND lease_owner IS NOT NULL AND lease_expires_at > now()
GROUP BY 1;

-- oldest_queued_run_age --
-- Seconds since the oldest queued run was created (0 when none is queued).
SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS seconds
FROM runs WHERE status = 'queued';

-- list_executors --
-- Executors that have not stopped and beat within the last hour: seconds since their last
-- beat, and whether that is within their stale limit (up).
SELECT name AS executor,
       greatest(extract(epoch FROM now() - heartbeat_at), 0)::float8 AS age,
       now() - heartbeat_at <= make_interval(secs => stale_after_s) AS up
FROM executors
WHERE stopped_at IS NULL AND heartbeat_at > now() - interval '1 hour';

-- count_backfill_values_by_pipeline --
-- Values of live backfills by pipeline: pending (waiting for room; not canceled) and the
-- queued or running runs that backfills admitted, and the backfills that have either.
SELECT p.name AS pipeline,
       coalesce(sum(w.pending), 0)::bigint AS pending,
       coalesce(sum(w.queued), 0)::bigint AS queued,
       coalesce(sum(w.running), 0)::bigint AS running,
       count(DISTINCT w.backfill_id) AS backfills
FROM (SELECT b.pipeline_id, b.id AS backfill_id, 1 AS pending, 0 AS queued, 0 AS running
      FROM backfill_values v JOIN backfills b ON b.id = v.backfill_id
      WHERE v.run_id IS NULL AND b.canceled_at IS NULL
      UNION ALL
      SELECT r.pipeline_id, split_part(r.trigger_key, ':', 2)::uuid, 0,
             (r.status = 'queued')::int, (r.status = 'running')::int
      FROM runs r  -- the key `backfill:<id>:<value>` names the backfill
      WHERE r.status IN ('queued', 'running') AND r.trigger_key LIKE 'backfill:%%') w
JOIN pipelines p ON p.id = w.pipeline_id
WHERE p.deleted_at IS NULL
GROUP BY p.name;
-- list_process_samples --
-- The `process_*` values of the coordinator and the executors that reported lately.
SELECT process, role, cpu_seconds, resident_bytes, virtual_bytes, start_time_seconds,
       open_fds, max_fds
FROM process_samples
WHERE reported_at > now() - make_interval(secs => stale_after_s)
ORDER BY process;

-- list_api_request_totals --
-- The API's request durations by method, route template and status.
SELECT method, route, status, buckets, count, sum_s FROM api_request_totals
ORDER BY method, route, status;

-- put_process_sample --
-- A process's latest `process_*` values, replacing its previous ones.
INSERT INTO process_samples (process, role, stale_after_s, cpu_seconds, resident_bytes,
                             virtual_bytes, start_time_seconds, open_fds, max_fds)
VALUES (%(process)s, %(role)s, %(stale_after_s)s, %(cpu_seconds)s, %(resident_bytes)s,
        %(virtual_bytes)s, %(start_time_seconds)s, %(open_fds)s, %(max_fds)s)
ON CONFLICT (process) DO UPDATE
SET role = excluded.role, reported_at = now(), stale_after_s = excluded.stale_after_s,
    cpu_seconds = excluded.cpu_seconds, resident_bytes = excluded.resident_bytes,
    virtual_bytes = excluded.virtual_bytes, start_time_seconds = excluded.start_time_seconds,
    open_fds = excluded.open_fds, max_fds = excluded.max_fds;

-- delete_process_sample --
-- A cleanly stopping process takes its values out of the scrape.
DELETE FROM process_samples WHERE process = %(process)s;

-- add_api_request_totals --
-- Add one worker's requests since its last addition to the series' totals.
INSERT INTO api_request_totals AS t (method, route, status, buckets, count, sum_s)
VALUES (%(method)s, %(route)s, %(status)s, %(buckets)s::float8[], %(count)s, %(sum_s)s)
ON CONFLICT (method, route, status) DO UPDATE
SET buckets = ARRAY(SELECT a + b FROM unnest(t.buckets, excluded.buckets) AS u(a, b)),
    count = t.count + excluded.count, sum_s = t.sum_s + excluded.sum_s;
