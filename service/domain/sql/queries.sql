-- Named queries of the coordinator side (API, CLI, admission), loaded once with the other
-- files of this folder (service/domain/sql/__init__.py) and run by service/domain/db.py.
-- Parameters are psycopg2 named placeholders; timestamps come from the database clock
-- unless a column is computed from the injected clock (schedules).

-- check_database --
-- Liveness probe for GET /health: the database answers, in its encoding.
SELECT pg_encoding_to_char(encoding) AS encoding FROM pg_database
WHERE datname = current_database();

-- find_principal_by_token_hash --
-- The live principal owning a token (by its sha256 hex: unrevoked, unexpired on the database
-- clock). A find also clears the failed authentications of the caller's address once its
-- last failure is 2 s old (the longest penalty: interleaving a valid token with guesses
-- does not undo their penalty), auditing first the failures not yet in the audit, and writes
-- the token's last use when the stored one is a minute old (not on every request).
WITH found AS (
    SELECT id, name, role, token_hash FROM principals
    WHERE token_hash = %(token_hash)s AND revoked_at IS NULL
      AND (expires_at IS NULL OR expires_at > now())),
cleared AS (
    DELETE FROM auth_failures
    WHERE client_addr = %(client_addr)s AND last_failed_at <= now() - interval '2 seconds'
      AND EXISTS (SELECT FROM found)
    RETURNING client_addr, failures, unaudited),
audited AS (
    INSERT INTO audit (principal, action, entity_type, entity_id, details)
    SELECT 'anonymous', 'auth.failed', 'client', c.client_addr,
           jsonb_build_object('failures', c.unaudited, 'consecutive', c.failures,
                              'cleared_by', (SELECT name FROM found))
    FROM cleared c WHERE c.unaudited > 0),
touched AS (
    UPDATE principals p SET last_used_at = now() FROM found
    WHERE p.id = found.id
      AND (p.last_used_at IS NULL OR p.last_used_at < now() - interval '1 minute'))
SELECT id, name, role, token_hash FROM found;

-- find_principal_by_name --
-- The unrevoked principal of a name (seed idempotency), whether it never expires and whether
-- it is expired (on the database clock).
SELECT id, name, role, token_hash, expires_at IS NULL AS permanent,
       expires_at IS NOT NULL AND expires_at <= now() AS expired
FROM principals WHERE name = %(name)s AND revoked_at IS NULL;

-- insert_principal --
-- A new principal; returns nothing when the name or token hash is taken.
INSERT INTO principals (id, name, role, token_hash)
VALUES (%(id)s, %(name)s, %(role)s, %(token_hash)s)
ON CONFLICT DO NOTHING
RETURNING id, name, role;

-- update_principal_token --
-- Give an unrevoked principal a token hash and role that never expire (`etl seed`).
UPDATE principals SET token_hash = %(token_hash)s, role = %(role)s, expires_at = NULL
WHERE name = %(name)s AND revoked_at IS NULL
RETURNING id, name, role;

-- insert_audit --
-- One audit row, written in the transaction of the change it describes.
INSERT INTO audit (principal, action, entity_type, entity_id, details, trace_id)
VALUES (%(principal)s, %(action)s, %(entity_type)s, %(entity_id)s, %(details)s, %(trace_id)s);

-- insert_console_session --
-- A web console session: only the sha256 hex of the cookie value is stored, with an expiry.
-- It belongs to the API token that signed in (`api_token_hash`).
INSERT INTO console_sessions (id, token_hash, principal_id, api_token_hash, expires_at)
VALUES (%(id)s, %(token_hash)s, %(principal_id)s, %(api_token_hash)s,
        now() + make_interval(secs => %(ttl_s)s));

-- find_console_session --
-- The live (unrevoked, unexpired on the database clock) session of a cookie and its principal,
-- while the API token that signed in is still the principal's, unrevoked and unexpired. Like
-- an API call, it writes the token's last use when the stored one is a minute old.
WITH found AS (
    SELECT s.id, s.token_hash, s.expires_at, p.id AS principal_id, p.name, p.role
    FROM console_sessions s JOIN principals p ON p.id = s.principal_id
    WHERE s.token_hash = %(token_hash)s AND s.revoked_at IS NULL AND s.expires_at > now()
      AND p.token_hash = s.api_token_hash AND p.revoked_at IS NULL
      AND (p.expires_at IS NULL OR p.expires_at > now())),
touched AS (
    UPDATE principals p SET last_used_at = now() FROM found
    WHERE p.id = found.principal_id
      AND (p.last_used_at IS NULL OR p.last_used_at < now() - interval '1 minute'))
SELECT id, token_hash, expires_at, principal_id, name, role FROM found;

-- revoke_console_session --
-- Sign-out: the session stops working at once.
UPDATE console_sessions SET revoked_at = now()
WHERE token_hash = %(token_hash)s AND revoked_at IS NULL
RETURNING id, principal_id;

-- delete_stale_console_sessions --
-- Forget sessions that expired or were revoked more than a day ago (run at each sign-in).
DELETE FROM console_sessions
WHERE expires_at < now() - interval '1 day' OR revoked_at < now() - interval '1 day';

-- database_now --
-- The database clock (the console draws live attempts up to it, never to Python's clock).
SELECT now() AS now;

-- list_pipeline_overview --
-- One page of pipelines by name (after `after`, or the page before `before`; `limit` rows),
-- each with whether it is paused, its last non-skipped run and its live schedules' next
-- fire; sorted by name.
WITH page AS (
    SELECT id, name, revision, paused, updated_at FROM pipelines
    WHERE deleted_at IS NULL
      AND (%(after)s::text IS NULL OR name > %(after)s::text)
      AND (%(before)s::text IS NULL OR name < %(before)s::text)
    ORDER BY CASE WHEN %(before)s::text IS NULL THEN name END,
             CASE WHEN %(before)s::text IS NOT NULL THEN name END DESC
    LIMIT %(limit)s)
SELECT p.id, p.name, p.revision, p.paused, p.updated_at,
       lr.id AS last_run_id, lr.status AS last_run_status, lr.created_at AS last_run_at,
       sc.schedules, sc.next_fire_at
FROM page p
LEFT JOIN LATERAL (
    SELECT r.id, r.status, r.created_at FROM runs r
    WHERE r.pipeline_id = p.id AND r.status <> 'skipped'
    ORDER BY r.created_at DESC, r.id DESC LIMIT 1) lr ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS schedules, min(s.next_fire_at) AS next_fire_at FROM schedules s
    WHERE s.pipeline_id = p.id AND s.deleted_at IS NULL) sc ON true
ORDER BY p.name;

-- list_audit_actions --
-- The distinct audit actions (the console's filter choices).
SELECT DISTINCT action FROM audit ORDER BY action;

-- insert_pipeline --
-- A new pipeline at revision 1; returns nothing when the name is taken.
INSERT INTO pipelines (id, name, revision) VALUES (%(id)s, %(name)s, 1)
ON CONFLICT (name) WHERE deleted_at IS NULL DO NOTHING
RETURNING id;

-- insert_revision --
-- An immutable plan snapshot (the table forbids updates).
INSERT INTO revisions (pipeline_id, number, plan, created_by)
VALUES (%(pipeline_id)s, %(number)s, %(plan)s, %(created_by)s);

-- get_pipeline --
-- A live pipeline with its current revision's plan (a deleted one too with `include_deleted`).
SELECT p.id, p.name, p.revision, v.plan, p.paused, p.created_at, p.updated_at, p.deleted_at
FROM pipelines p JOIN revisions v ON v.pipeline_id = p.id AND v.number = p.revision
WHERE p.id = %(pipeline_id)s AND (p.deleted_at IS NULL OR %(include_deleted)s);

-- set_pipeline_paused --
-- Pause or unpause a pipeline; returns nothing for an unknown one.
UPDATE pipelines SET paused = %(paused)s, updated_at = now()
WHERE id = %(pipeline_id)s AND deleted_at IS NULL
RETURNING id;

-- lock_pipeline --
-- Lock a live pipeline row so concurrent PATCHes number their revisions one after the other
-- (and a delete and a new schedule of it go one after the other).
SELECT id, name, revision FROM pipelines WHERE id = %(pipeline_id)s AND deleted_at IS NULL
FOR NO KEY UPDATE;

-- update_pipeline_revision --
-- Point a pipeline at its new current revision.
UPDATE pipelines SET revision = %(revision)s, updated_at = now() WHERE id = %(pipeline_id)s;

-- get_revision --
-- One revision of a pipeline.
SELECT pipeline_id, number, plan, created_by, created_at
FROM revisions WHERE pipeline_id = %(pipeline_id)s AND number = %(number)s;

-- get_revision_plans --
-- The plans of several (pipeline, revision) pairs, for runs that have no step rows yet.
SELECT pipeline_id, number, plan FROM revisions
WHERE (pipeline_id, number) IN (
    SELECT unnest(%(pipeline_ids)s::uuid[]), unnest(%(numbers)s::integer[]));

-- lock_admission --
-- Serialise every admission (API triggers, resumes, scheduler fires) across processes.
SELECT pg_advisory_xact_lock(%(key)s);

-- find_run_by_trigger_key --
-- The run a trigger key already created for a pipeline, whatever its status.
SELECT id FROM runs WHERE pipeline_id = %(pipeline_id)s AND trigger_key = %(trigger_key)s;

-- count_active_runs --
-- Runs holding a slot (queued or running): for one pipeline and in total.
SELECT count(*) FILTER (WHERE pipeline_id = %(pipeline_id)s) AS pipeline_active,
       count(*) AS total_active
FROM runs WHERE status IN ('queued', 'running');

-- insert_run --
-- A new run (queued, or skipped with a reason) bound to a revision, returned as `get_run`
-- shows it (one round trip less per admission). The subquery sees the runs as they were
-- before this INSERT, and the new run's queue_seq is the pipeline's highest: its position
-- is the queued runs before it plus one.
INSERT INTO runs (id, pipeline_id, revision, status, reason, trigger_key, trace_id,
                  parent_span_id, trace_sampled, created_by, params, plan)
VALUES (%(id)s, %(pipeline_id)s, %(revision)s, %(status)s, %(reason)s, %(trigger_key)s,
        %(trace_id)s, %(parent_span_id)s, %(trace_sampled)s, %(created_by)s, %(params)s,
        %(plan)s)
RETURNING id, pipeline_id, revision, status, reason, trigger_key, trace_id,
          parent_span_id, trace_sampled, cancel_requested, created_by, created_at, started_at,
          finished_at, purged_at, error AS run_error, params,
          CASE WHEN status = 'queued' THEN (
              SELECT count(*) + 1 FROM runs q
              WHERE q.pipeline_id = %(pipeline_id)s AND q.status = 'queued') END
              AS queue_position;

-- list_run_resumes --
-- When a run was resumed by hand (the audit's accepted `run.resume` rows), oldest first.
SELECT created_at FROM audit
WHERE action = 'run.resume' AND entity_type = 'run' AND entity_id = %(run_id)s
  AND details ->> 'outcome' = 'requeued'
ORDER BY created_at;

-- get_run --
-- One run, with its 1-based position among its pipeline's queued runs when queued.
SELECT r.id, r.pipeline_id, r.revision, r.status, r.reason, r.trigger_key, r.trace_id,
       r.parent_span_id, r.trace_sampled, r.cancel_requested, r.created_by, r.created_at, r.started_at, r.finished_at, r.purged_at,
       r.error AS run_error, r.params,
       CASE WHEN r.status = 'queued' THEN (
           SELECT count(*) FROM runs q
           WHERE q.pipeline_id = r.pipeline_id AND q.status = 'queued'
             AND q.queue_seq <= r.queue_seq) END AS queue_position
FROM runs r WHERE r.id = %(run_id)s;

-- lock_run --
-- Lock a run row for a state change (cancel, resume) against the dag-advancer.
SELECT id, pipeline_id, revision, status, trace_id, cancel_requested, purged_at FROM runs
WHERE id = %(run_id)s FOR NO KEY UPDATE;

-- list_step_runs --
-- The step rows of some runs, in plan order.
-- `cursor_range`: an incremental table ingest's range (`step_cursor_ranges`), else null.
SELECT s.run_id, s.name, s.type, s.position, s.status, s.records_in, s.records_out,
       s.rejected, s.columns, s.input_digest, s.output_digest, s.checkpoint, s.batches,
       s.row_errors, s.checks, s.schema_change, s.error, s.retry_at, s.started_at,
       s.finished_at,
       CASE WHEN c.run_id IS NOT NULL THEN jsonb_build_object(
           'table', c.table_name, 'column', c.column_name, 'after', c.lower_value,
           'upto', c.upper_value, 'late_rows', c.late_rows) END AS cursor_range
FROM step_runs s
LEFT JOIN step_cursor_ranges c ON c.run_id = s.run_id AND c.step_name = s.name
WHERE s.run_id = ANY(%(run_ids)s::uuid[])
ORDER BY s.run_id, s.position;

-- list_attempts --
-- The attempts of some runs' steps, in number order; `fused_into` names the step whose
-- attempt a fused follower's attempt ran inside (stage fusion).
SELECT a.run_id, a.step_name, a.number, a.executor, a.started_at, a.finished_at, a.outcome,
       a.error, h.step_name AS fused_into
FROM attempts a LEFT JOIN attempts h ON h.id = a.fused_into
WHERE a.run_id = ANY(%(run_ids)s::uuid[])
ORDER BY a.run_id, a.step_name, a.number;

-- cancel_queued_run --
-- A queued run ends at once as canceled.
UPDATE runs SET status = 'canceled', finished_at = now()
WHERE id = %(run_id)s AND status = 'queued';

-- cancel_step_runs --
-- The unfinished steps of a canceled queued run end as canceled; finished ones keep status.
UPDATE step_runs SET status = 'canceled', finished_at = now(), retry_at = NULL
WHERE run_id = %(run_id)s AND status IN ('pending', 'running', 'retry_wait');

-- request_run_cancel --
-- Ask the executors to stop a running run at the next batch boundary.
UPDATE runs SET cancel_requested = true WHERE id = %(run_id)s AND status = 'running';

-- requeue_run --
-- A failed run re-enters its pipeline's queue at the back; it keeps its first start, so its
-- duration counts the work done before the resume.
UPDATE runs SET status = 'queued', queue_seq = nextval('run_queue_seq'), finished_at = NULL,
                cancel_requested = false, error = NULL, stages_cleared = false
WHERE id = %(run_id)s AND status = 'failed';

-- reset_step_runs --
-- The steps a resume runs again (dag.steps_to_rerun) start over; the others keep their output.
UPDATE step_runs
SET status = 'pending', records_in = 0, records_out = 0, rejected = 0, columns = NULL,
    input_digest = NULL, output_digest = NULL, checkpoint = NULL, batches = 0,
    row_errors = '[]', checks = '[]', schema_change = NULL, error = NULL, retry_at = NULL,
    started_at = NULL, finished_at = NULL, output_kept = true
WHERE run_id = %(run_id)s AND name = ANY(%(step_names)s)
RETURNING name;

-- delete_step_batches --
-- Drop the committed output batches of steps that start over.
DELETE FROM step_batches WHERE run_id = %(run_id)s AND step_name = ANY(%(step_names)s);

-- insert_schedule --
-- A new schedule with its first fire time (computed by the caller in UTC; none for a watch).
INSERT INTO schedules (id, pipeline_id, every_minutes, daily_at, watch, anchor_at,
                       next_fire_at, catchup, created_by)
VALUES (%(id)s, %(pipeline_id)s, %(every_minutes)s, %(daily_at)s, %(watch)s, %(anchor_at)s,
        %(next_fire_at)s, %(catchup)s, %(created_by)s)
RETURNING id, pipeline_id, every_minutes, daily_at, watch, anchor_at, next_fire_at,
          last_fired_at, last_run_id, last_skip_reason, catchup, created_at, 0 AS files_pending;

-- delete_schedule --
-- Soft-delete a live schedule so it stops firing; returns nothing if unknown or deleted.
UPDATE schedules SET deleted_at = now()
WHERE id = %(schedule_id)s AND pipeline_id = %(pipeline_id)s AND deleted_at IS NULL
RETURNING id, every_minutes, daily_at;


-- Tokens (service/domain/tokens.py): a principal is one token; its id is the token's id.

-- insert_token --
-- A new token with an optional lifetime; returns nothing when a live token has the name.
INSERT INTO principals (id, name, role, token_hash, expires_at)
VALUES (%(id)s, %(name)s, %(role)s, %(token_hash)s,
        now() + make_interval(secs => %(expires_in_s)s))
ON CONFLICT DO NOTHING
RETURNING id, name, role, created_at, last_used_at, expires_at, revoked_at;

-- get_token --
-- One token's record (never its hash).
SELECT id, name, role, created_at, last_used_at, expires_at, revoked_at
FROM principals WHERE id = %(id)s;

-- lock_token --
-- Lock a token's row for a revocation or rotation (a sign-in's find waits, then sees it).
SELECT id, name, role, token_hash, expires_at, revoked_at FROM principals
WHERE id = %(id)s FOR UPDATE;

-- lock_admin_tokens --
-- Serialise revocations and expiries of admin tokens (two admins revoking each other's last
-- two tokens at once would leave none): taken before counting the admin tokens that stay.
SELECT pg_advisory_xact_lock(hashtext('etl.admin_tokens'));

-- other_live_admin_tokens --
-- How many live (unrevoked, unexpired on the database clock) admin tokens there are besides
-- one, and how many of them never expire (the last live one, and the last permanent one, are
-- never revoked; the last permanent one is never given an expiry).
SELECT count(*) AS n, count(*) FILTER (WHERE expires_at IS NULL) AS permanent FROM principals
WHERE role = %(role)s AND id <> %(id)s AND revoked_at IS NULL
  AND (expires_at IS NULL OR expires_at > now());

-- revoke_token --
-- Revoke a token at once: its API calls and console sessions answer 401 from now on.
UPDATE principals SET revoked_at = now() WHERE id = %(id)s AND revoked_at IS NULL;

-- set_token_hash --
-- Give a token a new secret (rotation), with a fresh lifetime when one is given.
UPDATE principals
SET token_hash = %(token_hash)s,
    expires_at = CASE WHEN %(expires_in_s)s::integer IS NULL THEN expires_at
                      ELSE now() + make_interval(secs => %(expires_in_s)s) END
WHERE id = %(id)s;

-- retire_token_hash --
-- Remember a secret a token no longer has (rotated or re-seeded away): never accepted again.
INSERT INTO retired_tokens (token_hash, principal_id) VALUES (%(token_hash)s, %(principal_id)s)
ON CONFLICT DO NOTHING;

-- token_hash_state --
-- Whether a secret was revoked or rotated away (`etl seed` refuses to bring it back), and
-- whether a principal holds it.
SELECT EXISTS (SELECT FROM retired_tokens WHERE token_hash = %(token_hash)s)
    OR EXISTS (SELECT FROM principals
               WHERE token_hash = %(token_hash)s AND revoked_at IS NOT NULL) AS retired,
       EXISTS (SELECT FROM principals WHERE token_hash = %(token_hash)s) AS taken;

-- end_principal_sessions --
-- End every open console session of a principal (its token was revoked or rotated).
UPDATE console_sessions SET revoked_at = now()
WHERE principal_id = %(principal_id)s AND revoked_at IS NULL
RETURNING id;

-- Failed authentications (service/domain/authfailures.py), per client address.

-- record_auth_failure --
-- Count a failed bearer token or sign-in of an address: consecutive failures (restarting
-- after 15 quiet minutes), failures not yet audited, and whether an audit row is due (at
-- most one a minute per address). The row lock serialises an address's failures.
INSERT INTO auth_failures (client_addr, failures, last_failed_at, unaudited)
VALUES (%(client_addr)s, 1, now(), 1)
ON CONFLICT (client_addr) DO UPDATE
SET failures = CASE WHEN auth_failures.last_failed_at < now() - interval '15 minutes' THEN 1
                    ELSE LEAST(auth_failures.failures + 1, 1000000) END,
    last_failed_at = now(),
    unaudited = LEAST(auth_failures.unaudited + 1, 1000000000)
RETURNING failures, unaudited,
          (audited_at IS NULL OR audited_at <= now() - interval '1 minute') AS audit_due;

-- mark_auth_failures_audited --
-- The failures of an address are in the audit now.
UPDATE auth_failures SET audited_at = now(), unaudited = 0 WHERE client_addr = %(client_addr)s;

-- delete_stale_auth_failures --
-- Forget addresses quiet for a day (run with each audited failure).
DELETE FROM auth_failures WHERE last_failed_at < now() - interval '1 day';

-- Pipeline deletion (service/domain/pipelines.py).

-- count_pipeline_active_runs --
-- A pipeline's queued and running runs (a delete is refused while there are any).
SELECT count(*) AS active FROM runs
WHERE pipeline_id = %(pipeline_id)s AND status IN ('queued', 'running');

-- delete_pipeline_schedules --
-- Soft-delete a pipeline's live schedules (they never fire again); their ids.
UPDATE schedules SET deleted_at = now()
WHERE pipeline_id = %(pipeline_id)s AND deleted_at IS NULL
RETURNING id;

-- mark_pipeline_deleted --
-- Soft-delete a pipeline: its row, revisions and runs stay; its name is free again.
UPDATE pipelines SET deleted_at = now(), updated_at = now()
WHERE id = %(pipeline_id)s AND deleted_at IS NULL;
