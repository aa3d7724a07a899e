-- The run-end webhook's "run" carries the run's `params` (issue 33), as the run lists do
-- (an item of `GET /api/v1/runs`). The summary of migration 0011 stays as it is, under a
-- name of its own; the trigger of 0011 calls `webhook_run_summary` by name.
ALTER FUNCTION webhook_run_summary(uuid) RENAME TO webhook_run_summary_0011;

CREATE FUNCTION webhook_run_summary(the_run uuid) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT webhook_run_summary_0011(the_run)
           || jsonb_build_object('params', (SELECT r.params FROM runs r WHERE r.id = the_run))
$$;
