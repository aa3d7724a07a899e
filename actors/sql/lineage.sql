-- Queries of the OpenLineage emitter (actors/lineage): what an event tells besides its
-- notice, read after the state change committed, on the emitter's own connection.

-- get_lineage_run --
-- A run's pipeline name, trace id, error, revision plan (its values substituted) and params.
SELECT p.name, r.trace_id, r.error, coalesce(r.plan, v.plan) AS plan, r.params
FROM runs r
JOIN pipelines p ON p.id = r.pipeline_id
JOIN revisions v ON v.pipeline_id = r.pipeline_id AND v.number = r.revision
WHERE r.id = %(run_id)s;

-- list_lineage_steps --
-- Every step of a run with its counters, output columns, error and check results.
SELECT name, records_in, records_out, rejected, columns, error, checks
FROM step_runs
WHERE run_id = %(run_id)s;

-- get_expired_attempt --
-- The number of a step's last attempt that the reaper ended (lease expired).
SELECT max(number) AS number
FROM attempts
WHERE run_id = %(run_id)s AND step_name = %(name)s AND outcome = 'lease_expired';
