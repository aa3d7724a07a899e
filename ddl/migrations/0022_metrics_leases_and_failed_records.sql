-- Two counters say what they claim. `etl_lease_takeovers_total` counts lost leases: the
-- attempts of a fused group's followers (`fused_into` set) share their leader's lease and
-- end `lease_expired` with it, so only the attempt holding the lease counts (one kill of an
-- executor running a fused group of three steps is one takeover, not three).
-- `etl_records_total` counts the steps that failed too: their records in and rejected (the
-- rejects of a failed step were invisible); records out only for succeeded steps, whose
-- output was published.
CREATE OR REPLACE FUNCTION metric_step_facts(s step_runs)
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
    FROM l, (VALUES ('in', s.records_in::float8, true), ('out', s.records_out::float8, false),
                    ('rejected', s.rejected::float8, true)) AS k (kind, n, if_failed)
    WHERE s.status = 'succeeded' OR (s.status = 'failed' AND k.if_failed)
$$;

CREATE OR REPLACE FUNCTION metric_attempt_facts(a attempts)
RETURNS TABLE (family text, labels jsonb, value float8) LANGUAGE sql STABLE AS $$
    WITH l AS (SELECT jsonb_build_object('pipeline', p.name) AS l
               FROM runs r JOIN pipelines p ON p.id = r.pipeline_id WHERE r.id = a.run_id)
    SELECT 'etl_attempts_total', l || jsonb_build_object('outcome', a.outcome), 1::float8 FROM l
    UNION ALL
    SELECT 'etl_lease_takeovers_total',
           l || jsonb_build_object('executor',
                                   split_part(coalesce(a.lease_owner, a.executor, ''), ':', 1)),
           1
    FROM l WHERE a.outcome = 'lease_expired' AND a.fused_into IS NULL
$$;
