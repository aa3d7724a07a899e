-- Metrics kept as the state changes, so that a scrape costs the same whatever the history
-- (service/domain/metrics.py). A trigger on runs, step_runs, attempts and schedules appends
-- what a change adds to the counters to `metric_deltas`, in the transaction that makes the
-- change: insert-only, so no two transactions wait on one counter row. The coordinator's
-- sweep folds the deltas into `metric_totals` (actors/metric_fold.py); a scrape reads both
-- in one snapshot. Counters never go down: a purge deletes no row of either table.
--
-- A sample is a family (the Prometheus sample name without `_bucket`/`_sum`), a JSON object
-- of labels and a value. Families ending in `_timestamp_seconds` keep the greatest value;
-- every other family adds up. A histogram observation is one delta in its bucket (`le`, the
-- smallest bound at or above it; null above every bound) and one in its `_sum` family.

CREATE TABLE metric_totals (
    family text NOT NULL,
    labels jsonb NOT NULL,
    value  float8 NOT NULL,
    PRIMARY KEY (family, labels)
);

CREATE TABLE metric_deltas (
    id     bigserial PRIMARY KEY,
    family text NOT NULL,
    labels jsonb NOT NULL,
    value  float8 NOT NULL
);

-- Executors announce themselves and beat every heartbeat interval, busy or idle
-- (actors/presence.py); a clean stop marks the row. One row per executor name.
CREATE TABLE executors (
    name          text PRIMARY KEY,
    owner         text NOT NULL,                 -- name:boot id of the live incarnation
    pid           integer NOT NULL,
    stale_after_s float8 NOT NULL,               -- no beat for this long: not up
    started_at    timestamptz NOT NULL DEFAULT now(),
    heartbeat_at  timestamptz NOT NULL DEFAULT now(),
    stopped_at    timestamptz
);

-- The bounds of the duration histograms, in seconds (the scrape reads them from here).
CREATE FUNCTION metric_duration_bounds() RETURNS float8[] LANGUAGE sql IMMUTABLE AS $$
    SELECT '{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 10800}'::float8[]
$$;

CREATE FUNCTION metric_duration_bucket(seconds float8) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(to_jsonb(min(b)), 'null'::jsonb)
    FROM unnest(metric_duration_bounds()) AS b WHERE seconds <= b
$$;

-- One duration observation: its bucket and its sum, under `labels`.
CREATE FUNCTION metric_duration(family text, labels jsonb, seconds float8)
RETURNS TABLE (family text, labels jsonb, value float8) LANGUAGE sql IMMUTABLE AS $$
    SELECT family, labels || jsonb_build_object('le', metric_duration_bucket(seconds)), 1::float8
    UNION ALL
    SELECT family || '_sum', labels, seconds
$$;

-- What a run adds when it is created (`created`) or reaches a final status.
CREATE FUNCTION metric_run_facts(r runs, created boolean)
RETURNS TABLE (family text, labels jsonb, value float8) LANGUAGE sql STABLE AS $$
    WITH p AS (SELECT jsonb_build_object('pipeline', name) AS l FROM pipelines
               WHERE id = r.pipeline_id),
         ended AS (SELECT l FROM p WHERE r.status IN ('succeeded', 'failed', 'canceled', 'skipped')),
         ran AS (SELECT l, extract(epoch FROM r.finished_at - r.started_at)::float8 AS seconds
                 FROM ended WHERE r.started_at IS NOT NULL AND r.finished_at IS NOT NULL)
    SELECT 'etl_schedule_fires_total',
           l || jsonb_build_object('outcome',
                                   CASE WHEN r.status = 'skipped' THEN 'skipped' ELSE 'admitted' END),
           1::float8
    FROM p WHERE created AND r.trigger_key LIKE 'schedule:%'
    UNION ALL
    SELECT 'etl_runs_total', l || jsonb_build_object('status', r.status), 1 FROM ended
    UNION ALL
    SELECT 'etl_triggers_skipped_total', l || jsonb_build_object('reason', r.reason), 1
    FROM ended WHERE r.status = 'skipped'
    UNION ALL
    SELECT d.* FROM ran, metric_duration('etl_run_duration_seconds', ran.l, ran.seconds) d
    UNION ALL
    SELECT 'etl_pipeline_last_success_timestamp_seconds', l,
           extract(epoch FROM r.finished_at)::float8
    FROM ended WHERE r.status = 'succeeded' AND r.finished_at IS NOT NULL
    UNION ALL
    SELECT 'etl_pipeline_last_failure_timestamp_seconds', l,
           extract(epoch FROM r.finished_at)::float8
    FROM ended WHERE r.status = 'failed' AND r.finished_at IS NOT NULL
    UNION ALL
    SELECT 'etl_runs_stalled_total', l, 1 FROM ended
    WHERE r.status = 'failed'
      AND EXISTS (SELECT 1 FROM step_runs s WHERE s.run_id = r.id AND s.error LIKE 'stalled:%')
$$;

-- What a step adds when it reaches a new status: a retry wait, or a final status (with its
-- duration when it ran, and its records when it succeeded).
CREATE FUNCTION metric_step_facts(s step_runs)
RETURNS TABLE (family text, labels jsonb, value float8) LANGUAGE sql STABLE AS $$
    WITH l AS (SELECT jsonb_build_object('pipeline', p.name, 'step', s.name) AS l
               FROM runs r JOIN pipelines p ON p.id = r.pipeline_id WHERE r.id = s.run_id),
         ran AS (SELECT l, extract(epoch FROM s.finished_at - s.started_at)::float8 AS seconds
                 FROM l WHERE s.status IN ('succeeded', 'failed')
                          AND s.started_at IS NOT NULL AND s.finished_at IS NOT NULL)
    SELECT 'etl_step_retries_total', l, 1::float8 FROM l WHERE s.status = 'retry_wait'
    UNION ALL
    SELECT 'etl_steps_total', l || jsonb_build_object('status', s.status), 1 FROM l
    WHERE s.status IN ('succeeded', 'failed', 'upstream_failed', 'not_run', 'canceled')
    UNION ALL
    SELECT d.* FROM ran, metric_duration('etl_step_duration_seconds', ran.l, ran.seconds) d
    UNION ALL
    SELECT 'etl_records_total', l || jsonb_build_object('kind', k.kind), k.n
    FROM l, (VALUES ('in', s.records_in::float8), ('out', s.records_out::float8),
                    ('rejected', s.rejected::float8)) AS k (kind, n)
    WHERE s.status = 'succeeded'
$$;

-- What an attempt adds when it ends: its outcome, and a lost lease by the executor that lost it.
CREATE FUNCTION metric_attempt_facts(a attempts)
RETURNS TABLE (family text, labels jsonb, value float8) LANGUAGE sql STABLE AS $$
    WITH l AS (SELECT jsonb_build_object('pipeline', p.name) AS l
               FROM runs r JOIN pipelines p ON p.id = r.pipeline_id WHERE r.id = a.run_id)
    SELECT 'etl_attempts_total', l || jsonb_build_object('outcome', a.outcome), 1::float8 FROM l
    UNION ALL
    SELECT 'etl_lease_takeovers_total',
           l || jsonb_build_object('executor',
                                   split_part(coalesce(a.lease_owner, a.executor, ''), ':', 1)),
           1
    FROM l WHERE a.outcome = 'lease_expired'
$$;

-- The trigger of every counted table: a run counts when it is created (a schedule's fire;
-- a skipped run ends there) and when it reaches a final status, a step when it reaches a
-- new status, an attempt when it ends.
CREATE FUNCTION metrics_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'runs' THEN
        INSERT INTO metric_deltas (family, labels, value)
        SELECT * FROM metric_run_facts(NEW, TG_OP = 'INSERT');
    ELSIF TG_TABLE_NAME = 'step_runs' THEN
        INSERT INTO metric_deltas (family, labels, value) SELECT * FROM metric_step_facts(NEW);
    ELSE
        INSERT INTO metric_deltas (family, labels, value) SELECT * FROM metric_attempt_facts(NEW);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER runs_metrics_created AFTER INSERT ON runs
    FOR EACH ROW EXECUTE FUNCTION metrics_changed();
CREATE TRIGGER runs_metrics_ended AFTER UPDATE OF status ON runs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                       AND NEW.status IN ('succeeded', 'failed', 'canceled'))
    EXECUTE FUNCTION metrics_changed();
CREATE TRIGGER step_runs_metrics AFTER UPDATE OF status ON step_runs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                       AND NEW.status IN ('retry_wait', 'succeeded', 'failed', 'upstream_failed',
                                          'not_run', 'canceled'))
    EXECUTE FUNCTION metrics_changed();
CREATE TRIGGER attempts_metrics AFTER UPDATE OF outcome ON attempts
    FOR EACH ROW WHEN (OLD.outcome IS NULL AND NEW.outcome IS NOT NULL)
    EXECUTE FUNCTION metrics_changed();

-- A schedule fire that admitted no run (the pipeline paused, its revision no valid plan).
CREATE FUNCTION metrics_fire_without_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO metric_deltas (family, labels, value)
    SELECT 'etl_schedule_fires_total',
           jsonb_build_object('pipeline', p.name, 'outcome', 'no_run'), 1
    FROM pipelines p WHERE p.id = NEW.pipeline_id;
    RETURN NULL;
END $$;
CREATE TRIGGER schedules_metrics_no_run AFTER UPDATE OF last_fired_at ON schedules
    FOR EACH ROW WHEN (OLD.last_fired_at IS DISTINCT FROM NEW.last_fired_at
                       AND NEW.last_run_id IS NULL)
    EXECUTE FUNCTION metrics_fire_without_run();

-- The history before this migration, counted once (retries waited and fires without a run
-- were not recorded before, so they count from here on).
INSERT INTO metric_totals (family, labels, value)
SELECT f.family, f.labels,
       CASE WHEN right(f.family, 18) = '_timestamp_seconds' THEN max(f.value) ELSE sum(f.value) END
FROM (SELECT m.* FROM runs r, metric_run_facts(r, true) m
      UNION ALL
      SELECT m.* FROM step_runs s, metric_step_facts(s) m WHERE s.status <> 'retry_wait'
      UNION ALL
      SELECT m.* FROM attempts a, metric_attempt_facts(a) m WHERE a.outcome IS NOT NULL) f
GROUP BY f.family, f.labels;
