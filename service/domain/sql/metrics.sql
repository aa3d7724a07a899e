-- Named queries of GET /metrics (service/metrics.py): every value is read from the database
-- at scrape time, so any gunicorn worker answers the same. The tables are those of
-- ddl/migrations; "counters" are counts of rows that are never deleted (runs, attempts).

-- begin_metrics_snapshot --
-- Read every metric of one scrape from one consistent snapshot.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;

-- count_runs_by_status --
-- Runs by status.
SELECT status, count(*) AS n FROM runs GROUP BY status;

-- count_queued_runs_by_pipeline --
-- Queued runs of every pipeline (0 for a pipeline with none).
SELECT p.name AS pipeline, count(r.id) AS n
FROM pipelines p LEFT JOIN runs r ON r.pipeline_id = p.id AND r.status = 'queued'
GROUP BY p.name;

-- count_skipped_runs_by_reason --
-- Triggers refused by admission (runs recorded as skipped), by reason.
SELECT reason, count(*) AS n FROM runs WHERE status = 'skipped' GROUP BY reason;

-- count_active_leases_by_executor --
-- Unfinished attempts whose lease is live, by executor name (the owner without its boot id).
SELECT split_part(lease_owner, ':', 1) AS executor, count(*) AS n
FROM attempts
WHERE outcome IS NULL AND lease_owner IS NOT NULL AND lease_expires_at > now()
GROUP BY 1;

-- count_lease_takeovers_by_executor --
-- Attempts that lost their lease and were followed by a new attempt of the step, by the executor that lost it.
SELECT split_part(coalesce(a.lease_owner, a.executor, ''), ':', 1) AS executor, count(*) AS n
FROM attempts a
WHERE a.outcome = 'lease_expired'
  AND EXISTS (SELECT 1 FROM attempts b WHERE b.run_id = a.run_id AND b.step_name = a.step_name
                                          AND b.number > a.number)
GROUP BY 1;

-- count_attempts_by_outcome --
-- Finished step attempts by outcome.
SELECT outcome, count(*) AS n FROM attempts WHERE outcome IS NOT NULL GROUP BY outcome;

-- step_duration_buckets --
-- Finished steps (succeeded or failed) by type and status: how many took at most each bound (seconds).
SELECT s.type, s.status, b.le, count(*) FILTER (WHERE s.seconds <= b.le) AS n
FROM (SELECT type, status, extract(epoch FROM finished_at - started_at)::float8 AS seconds
      FROM step_runs
      WHERE status IN ('succeeded', 'failed')
        AND started_at IS NOT NULL AND finished_at IS NOT NULL) s
CROSS JOIN unnest(%(bounds)s::float8[]) AS b(le)
GROUP BY s.type, s.status, b.le;

-- step_duration_totals --
-- Finished steps (succeeded or failed) by type and status: count and total seconds.
SELECT type, status, count(*) AS n,
       coalesce(sum(extract(epoch FROM finished_at - started_at)), 0)::float8 AS seconds
FROM step_runs
WHERE status IN ('succeeded', 'failed') AND started_at IS NOT NULL AND finished_at IS NOT NULL
GROUP BY type, status;

-- sum_step_records_by_type --
-- Records read and written, and rows rejected, by the succeeded steps of each type.
SELECT type, coalesce(sum(records_in), 0) AS records_in,
       coalesce(sum(records_out), 0) AS records_out, coalesce(sum(rejected), 0) AS rejected
FROM step_runs WHERE status = 'succeeded'
GROUP BY type;

-- count_schedule_fires_by_pipeline --
-- Scheduler fires (runs with a schedule: trigger key), by pipeline and whether admission took them.
SELECT p.name AS pipeline,
       CASE WHEN r.status = 'skipped' THEN 'skipped' ELSE 'admitted' END AS outcome,
       count(*) AS n
FROM runs r JOIN pipelines p ON p.id = r.pipeline_id
WHERE r.trigger_key LIKE 'schedule:%%'
GROUP BY 1, 2;

-- oldest_queued_run_age --
-- Seconds since the oldest queued run was created (0 when none is queued).
SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS seconds
FROM runs WHERE status = 'queued';

-- count_stalled_runs_by_pipeline --
-- Runs the sweep ended because nothing was runnable for longer than the lease, by pipeline.
SELECT p.name AS pipeline, count(DISTINCT s.run_id) AS n
FROM step_runs s JOIN runs r ON r.id = s.run_id JOIN pipelines p ON p.id = r.pipeline_id
WHERE s.status = 'failed' AND s.error LIKE 'stalled:%%'
GROUP BY p.name;
