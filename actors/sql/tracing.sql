-- Queries of the engine's spans (actors/tracing.py): read only when the process has an
-- OpenTelemetry SDK, after the transactions they describe have committed.

-- get_attempt_ends --
-- How some attempts ended (outcome, error, when) and their steps' counters at that point.
SELECT a.id, a.outcome, a.error, a.finished_at, s.records_in, s.records_out, s.rejected
FROM attempts a
JOIN step_runs s ON s.run_id = a.run_id AND s.name = a.step_name
WHERE a.id = ANY(%(attempt_ids)s);

-- get_run_ends --
-- Some finished runs as their run spans show them: trace, times, status, pipeline, params.
SELECT r.id, r.pipeline_id, p.name AS pipeline_name, r.revision, r.status, r.trigger_key,
       r.params,
       r.trace_id, r.parent_span_id, r.trace_sampled, r.created_at, r.started_at,
       r.finished_at, r.error
FROM runs r
JOIN pipelines p ON p.id = r.pipeline_id
WHERE r.id = ANY(%(run_ids)s::uuid[]) AND r.finished_at IS NOT NULL;
