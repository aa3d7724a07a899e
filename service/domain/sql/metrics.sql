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
