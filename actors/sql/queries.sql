-- Queries of the execution engine: the dag-advancer, the executors' leases and fenced
-- checkpoints, and the coordinator's sweep. Every deadline is on the database clock.
-- Row locks are FOR NO KEY UPDATE (no key is ever changed or a row deleted under them): a
-- FOR UPDATE on a run would conflict with the FOR KEY SHARE that a foreign-key check of an
-- executor's commit takes on it, and deadlock with the advancer's step-row locks.

-- lock_pipeline --
-- Serialise every advance of one pipeline's runs (start, finish, promote).
SELECT id FROM pipelines WHERE id = %(pipeline_id)s FOR NO KEY UPDATE;

-- get_run_pipeline --
-- The pipeline of a run, read before taking the pipeline lock.
SELECT pipeline_id FROM runs WHERE id = %(run_id)s;

-- get_pipeline_run --
-- The pipeline's oldest run in a status, locked, with its revision's plan: the running run
-- (at most one), or the head of the queue (FIFO by trigger order).
SELECT r.id, r.trace_id, r.cancel_requested, coalesce(r.plan, v.plan) AS plan, r.revision
FROM runs r
JOIN revisions v ON v.pipeline_id = r.pipeline_id AND v.number = r.revision
WHERE r.pipeline_id = %(pipeline_id)s AND r.status = %(status)s
ORDER BY r.queue_seq
LIMIT 1
FOR NO KEY UPDATE OF r;

-- fail_unrunnable_run --
-- A run whose revision no longer passes validation fails at once, saying why: its open
-- attempts end (their executors' fences fail), its unfinished steps fail.
WITH attempts_ended AS (
    UPDATE attempts SET outcome = 'input_error', error = %(error)s, finished_at = now()
    WHERE run_id = %(run_id)s AND outcome IS NULL
    RETURNING id
), steps_ended AS (
    UPDATE step_runs SET status = 'failed', error = %(error)s, finished_at = now(),
                         retry_at = NULL
    WHERE run_id = %(run_id)s
      AND status IN ('pending', 'running', 'retry_wait')
    RETURNING name
)
UPDATE runs SET status = 'failed', error = %(error)s, finished_at = now(),
                started_at = coalesce(started_at, now())
WHERE id = %(run_id)s AND status IN ('queued', 'running');

-- start_run --
-- A queued run becomes running.
UPDATE runs SET status = 'running', started_at = coalesce(started_at, now())
WHERE id = %(run_id)s AND status = 'queued';

-- create_step_run --
-- One row per plan step when a run starts; a resumed run keeps its rows.
INSERT INTO step_runs (run_id, name, type, position)
VALUES (%(run_id)s, %(name)s, %(type)s, %(position)s)
ON CONFLICT (run_id, name) DO NOTHING;

-- lock_step_runs --
-- Every step of a run with its state, locked for the advancer's decision.
SELECT name, status, retry_at IS NOT NULL AND retry_at <= now() AS retry_due,
       extract(epoch FROM (retry_at - now())) AS retry_in_s
FROM step_runs
WHERE run_id = %(run_id)s
ORDER BY position
FOR NO KEY UPDATE;

-- set_step_status --
-- A step becomes upstream_failed, not_run or canceled (terminal, without running).
UPDATE step_runs SET status = %(status)s, finished_at = now(), retry_at = NULL
WHERE run_id = %(run_id)s AND name = %(name)s;

-- start_step --
-- A pending or due retry_wait step becomes running; its attempt is created next.
UPDATE step_runs
SET status = 'running', retry_at = NULL, started_at = coalesce(started_at, now()),
    finished_at = NULL, error = NULL
WHERE run_id = %(run_id)s AND name = %(name)s;

-- create_attempt --
-- The next attempt of a step; the lease is claimed by the executor that gets the message.
INSERT INTO attempts (run_id, step_name, number)
SELECT %(run_id)s, %(name)s, coalesce(max(number), 0) + 1
FROM attempts WHERE run_id = %(run_id)s AND step_name = %(name)s
RETURNING id, number;

-- cancel_unclaimed_attempts --
-- A cancel ends the run's open attempts that no executor has claimed (executors down or busy)
-- and their steps at once. The attempt's row lock orders this against a claim: whichever
-- comes second finds the other's change and does nothing. Returns the steps canceled.
WITH canceled AS (
    UPDATE attempts
    SET outcome = 'canceled', finished_at = now(), error = 'run canceled before any claim'
    WHERE run_id = %(run_id)s AND outcome IS NULL AND lease_owner IS NULL
    RETURNING step_name
)
UPDATE step_runs s
SET status = 'canceled', error = 'run canceled', finished_at = now(), retry_at = NULL
FROM canceled c
WHERE s.run_id = %(run_id)s AND s.name = c.step_name AND s.status = 'running'
RETURNING s.name;

-- finish_run --
-- A run whose steps are all terminal gets its final status.
UPDATE runs SET status = %(status)s, finished_at = now()
WHERE id = %(run_id)s AND status = 'running';

-- claim_attempt --
-- Take the lease of an unclaimed (or own) open attempt of a running step of a running run,
-- unless an earlier attempt of the step ran on an executor that saw other export or reject
-- directories than this one (`claim_refused_for_directories`): that attempt's chunks are
-- staged where this executor cannot see them. The attempt keeps the marks it is claimed with.
UPDATE attempts a
SET lease_owner = %(owner)s, executor = %(owner)s,
    lease_expires_at = now() + make_interval(secs => %(ttl_s)s),
    heartbeat_at = now(), started_at = coalesce(a.started_at, now()), error = NULL,
    export_mark = me.export_mark, reject_mark = me.reject_mark
FROM step_runs s, runs r,
     (SELECT (SELECT export_mark FROM executors WHERE owner = %(owner)s) AS export_mark,
             (SELECT reject_mark FROM executors WHERE owner = %(owner)s) AS reject_mark) me
WHERE a.id = %(attempt_id)s AND a.outcome IS NULL
  AND (a.lease_owner IS NULL OR a.lease_owner = %(owner)s)
  AND s.run_id = a.run_id AND s.name = a.step_name AND s.status = 'running'
  AND r.id = a.run_id AND r.status = 'running'
  AND NOT EXISTS (
      SELECT 1 FROM attempts p
      WHERE p.run_id = a.run_id AND p.step_name = a.step_name AND p.number < a.number
        AND (p.export_mark <> me.export_mark OR p.reject_mark <> me.reject_mark))
RETURNING a.run_id, a.step_name, a.number, r.trace_id, r.pipeline_id, r.parent_span_id,
          r.trace_sampled;

-- claim_refused_for_directories --
-- Why an open, unclaimed attempt is not this executor's to claim, when the reason is that an
-- earlier attempt of the step ran on an executor that saw other directories: the reason is
-- kept in the attempt's error (shown with the run) until an executor that sees them claims it.
UPDATE attempts a
SET error = 'waiting for an executor that sees the export and reject directories of attempt '
            || p.number || ' (' || coalesce(p.executor, '?') || '; export ' || p.export_mark
            || ', reject ' || p.reject_mark || '): ' || %(owner)s || ' sees export '
            || me.export_mark || ', reject ' || me.reject_mark
FROM attempts p,
     (SELECT export_mark, reject_mark FROM executors WHERE owner = %(owner)s) me
WHERE a.id = %(attempt_id)s AND a.outcome IS NULL AND a.lease_owner IS NULL
  AND p.run_id = a.run_id AND p.step_name = a.step_name AND p.number < a.number
  AND (p.export_mark <> me.export_mark OR p.reject_mark <> me.reject_mark)
RETURNING a.error;

-- heartbeat_attempt --
-- Extend the leases of an attempt and its fused followers if they are still ours; the
-- claimed attempt's row missing means it was taken over: stop at once.
UPDATE attempts a
SET heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => %(ttl_s)s)
FROM runs r
WHERE a.id = ANY(%(attempt_ids)s) AND a.lease_owner = %(owner)s AND a.outcome IS NULL
  AND r.id = a.run_id
RETURNING a.id, r.cancel_requested;

-- fence_attempt --
-- The first statement of every executor commit: lock our attempt row if the lease is ours.
-- The row lock also keeps the reaper off the attempt until this transaction ends.
UPDATE attempts a
SET heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => %(ttl_s)s),
    batches_done = a.batches_done + %(batches)s
FROM runs r
WHERE a.id = %(attempt_id)s AND a.lease_owner = %(owner)s AND a.outcome IS NULL
  AND r.id = a.run_id
RETURNING r.cancel_requested;

-- commit_batch --
-- One batch's commit in ONE statement for every step of a group that processed it (a
-- single step is a group of one): the fences of their attempts (lock and extend each attempt
-- if its lease is ours, count the batch) and, only when every fence held, each step's output
-- batch (if kept) and checkpoint. A lease that is lost raises SQLSTATE EL001
-- (`etl_lease_lost`, migration 0015), so nothing of the transaction commits: not the other
-- fences, nor the batch's staging rows sent in the same query (`actors.committer`).
-- `steps` is a JSON array of the steps' `save_checkpoint` values plus attempt_id, seq and
-- i (1, 2, ...); `payloads` their output batches (null: none), the i-th for the i-th step.
WITH v AS (
    SELECT v.*, p.payload
    FROM jsonb_to_recordset(%(steps)s::jsonb) AS v(
        attempt_id bigint, name text, seq integer, n_records integer, checkpoint jsonb,
        records_in bigint, records_out bigint, rejected bigint, input_digest text,
        output_digest text, batches integer, columns jsonb, row_errors jsonb,
        output_kept boolean, i bigint)
    JOIN unnest(%(payloads)s::bytea[]) WITH ORDINALITY AS p(payload, i) USING (i)
), fence AS (
    UPDATE attempts a
    SET heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => %(ttl_s)s),
        batches_done = a.batches_done + 1
    FROM runs r
    WHERE a.id IN (SELECT attempt_id FROM v) AND a.lease_owner = %(owner)s
      AND a.outcome IS NULL AND r.id = a.run_id
    RETURNING r.cancel_requested
), held AS (
    SELECT count(*) = (SELECT count(*) FROM v) AS ok, bool_or(cancel_requested) AS cancel
    FROM fence
), output AS (
    INSERT INTO step_batches (run_id, step_name, seq, records, payload)
    SELECT %(run_id)s, v.name, v.seq, v.n_records, v.payload
    FROM v WHERE v.payload IS NOT NULL AND (SELECT ok FROM held)
    ON CONFLICT (run_id, step_name, seq)
    DO UPDATE SET records = excluded.records, payload = excluded.payload
), progress AS (
    UPDATE step_runs s
    SET checkpoint = v.checkpoint, records_in = v.records_in, records_out = v.records_out,
        rejected = v.rejected, input_digest = v.input_digest, output_digest = v.output_digest,
        batches = v.batches, columns = v.columns, row_errors = v.row_errors,
        output_kept = v.output_kept
    FROM v
    WHERE s.run_id = %(run_id)s AND s.name = v.name AND (SELECT ok FROM held)
)
SELECT CASE WHEN ok THEN coalesce(cancel, false)
            ELSE etl_lease_lost(%(owner)s, ARRAY(SELECT attempt_id FROM v)) END
FROM held;

-- get_step_context --
-- What an attempt needs to run its step: the plan, policy, and the step's progress.
SELECT coalesce(r.plan, v.plan) AS plan, s.type, s.checkpoint, s.columns, s.records_in, s.records_out, s.rejected,
       s.input_digest, s.output_digest, s.batches, s.row_errors, s.output_kept
FROM step_runs s
JOIN runs r ON r.id = s.run_id
JOIN revisions v ON v.pipeline_id = r.pipeline_id AND v.number = r.revision
WHERE s.run_id = %(run_id)s AND s.name = %(name)s;

-- get_upstream_outputs --
-- The committed outputs (columns, batch count) of the given succeeded steps.
SELECT name, columns, batches, records_out, output_digest, output_kept
FROM step_runs
WHERE run_id = %(run_id)s AND name = ANY(%(names)s) AND status = 'succeeded';

-- list_unkept_outputs --
-- The succeeded steps of a run whose output batches were not all stored (stage fusion).
SELECT name FROM step_runs
WHERE run_id = %(run_id)s AND status = 'succeeded' AND NOT output_kept;

-- read_step_batch --
-- One committed output batch of a step.
SELECT payload FROM step_batches
WHERE run_id = %(run_id)s AND step_name = %(name)s AND seq = %(seq)s;

-- read_state_parts --
-- The parts of a step's computation state its checkpoint names (seq -1 .. low), in order.
SELECT payload FROM step_batches
WHERE run_id = %(run_id)s AND step_name = %(name)s AND seq < 0 AND seq >= %(low)s
ORDER BY seq DESC;

-- write_step_batch --
-- One output batch, committed together with the checkpoint that covers it.
INSERT INTO step_batches (run_id, step_name, seq, records, payload)
VALUES (%(run_id)s, %(name)s, %(seq)s, %(records)s, %(payload)s)
ON CONFLICT (run_id, step_name, seq)
DO UPDATE SET records = excluded.records, payload = excluded.payload;

-- delete_step_batches --
-- A step that starts from scratch drops output left by an earlier generation.
DELETE FROM step_batches WHERE run_id = %(run_id)s AND step_name = %(name)s;

-- save_checkpoint --
-- Progress of a step after a committed batch: input position, counters, digests, errors.
UPDATE step_runs
SET checkpoint = %(checkpoint)s, records_in = %(records_in)s, records_out = %(records_out)s,
    rejected = %(rejected)s, input_digest = %(input_digest)s,
    output_digest = %(output_digest)s, batches = %(batches)s, columns = %(columns)s,
    row_errors = %(row_errors)s, output_kept = %(output_kept)s
WHERE run_id = %(run_id)s AND name = %(name)s;

-- finish_attempt --
-- Record an attempt's outcome.
UPDATE attempts
SET outcome = %(outcome)s, error = %(error)s, finished_at = now()
WHERE id = %(attempt_id)s AND outcome IS NULL;

-- finish_step --
-- A step ends succeeded, failed or canceled.
UPDATE step_runs
SET status = %(status)s, error = %(error)s, finished_at = now(), retry_at = NULL
WHERE run_id = %(run_id)s AND name = %(name)s AND status = 'running';

-- end_waiting_dependents --
-- Steps below a step that failed for good, waiting for a retry that can never come (fused
-- followers that failed inside its attempt), end upstream_failed with it.
UPDATE step_runs
SET status = 'upstream_failed', finished_at = now(), retry_at = NULL
WHERE run_id = %(run_id)s AND name = ANY(%(names)s) AND status = 'retry_wait';

-- restart_step --
-- A step whose export lost what it staged starts over: no checkpoint, no counters.
UPDATE step_runs
SET checkpoint = NULL, records_in = 0, records_out = 0, rejected = 0, input_digest = NULL,
    output_digest = NULL, batches = 0, row_errors = '[]', output_kept = true
WHERE run_id = %(run_id)s AND name = %(name)s;

-- wait_retry --
-- A failed attempt that will be retried: the step waits until retry_at.
UPDATE step_runs
SET status = 'retry_wait', error = %(error)s,
    retry_at = now() + make_interval(secs => %(delay_s)s)
WHERE run_id = %(run_id)s AND name = %(name)s AND status = 'running';

-- release_own_leases --
-- A restarted executor expires the leases of its previous incarnation (same name).
UPDATE attempts
SET lease_expires_at = now()
WHERE outcome IS NULL AND lease_owner LIKE %(name_prefix)s AND lease_owner <> %(owner)s;


-- reap_expired_leases --
-- Attempts whose lease ran out end as lease_expired; the step continues in a new attempt.
-- The fused followers of an expired attempt expire with it, so that its next attempt finds
-- them waiting (pending) to adopt again.
UPDATE attempts a
SET outcome = 'lease_expired', finished_at = now(),
    error = 'lease of ' || a.lease_owner || ' expired at ' || a.lease_expires_at::text
FROM (
    SELECT id FROM attempts
    WHERE outcome IS NULL
      AND (lease_expires_at < now()
           OR fused_into IN (SELECT h.id FROM attempts h
                             WHERE h.outcome IS NULL AND h.lease_expires_at < now()))
    ORDER BY id
    FOR NO KEY UPDATE SKIP LOCKED
) due
WHERE a.id = due.id
RETURNING a.run_id, a.step_name,
          (SELECT position FROM step_runs s WHERE s.run_id = a.run_id AND s.name = a.step_name)
            AS position,
          a.fused_into IS NOT NULL AS fused;

-- count_lease_expiries --
-- How often the step's attempts since it (re)started lost their lease (poison-step guard).
SELECT count(*) AS expiries
FROM attempts a JOIN step_runs s ON s.run_id = a.run_id AND s.name = a.step_name
WHERE a.run_id = %(run_id)s AND a.step_name = %(name)s AND a.outcome = 'lease_expired'
  AND a.created_at >= s.started_at;

-- get_step_for_takeover --
-- A reaped step that still runs, with its run's trace id.
SELECT s.status, r.trace_id, r.pipeline_id
FROM step_runs s JOIN runs r ON r.id = s.run_id
WHERE s.run_id = %(run_id)s AND s.name = %(name)s AND r.status = 'running'
FOR NO KEY UPDATE OF s;

-- list_unclaimed_attempts --
-- Open attempts nobody claimed for a while: their wake-up may be lost; send it again.
SELECT a.id, r.trace_id
FROM attempts a JOIN runs r ON r.id = a.run_id
WHERE a.outcome IS NULL AND a.lease_owner IS NULL
  AND a.created_at < now() - make_interval(secs => %(older_than_s)s)
  AND r.status = 'running';

-- list_active_pipelines --
-- Pipelines with a queued or running run: the sweep advances each of them.
SELECT DISTINCT pipeline_id FROM runs WHERE status IN ('queued', 'running');

-- purge_broker_messages --
-- Drop finished broker rows older than the given age (dramatiq-pg rarely purges by itself).
DELETE FROM dramatiq.queue
WHERE state IN ('done', 'rejected') AND mtime < now() - make_interval(secs => %(older_than_s)s);

-- count_failed_attempts --
-- Failed attempts of the step since it (re)started: a resume gives a fresh retry budget,
-- and lease expiries do not use it up. (Its first attempt is created in the transaction
-- that sets started_at, so created_at >= started_at holds for every attempt since.)
SELECT count(*) FROM attempts a JOIN step_runs s ON s.run_id = a.run_id AND s.name = a.step_name
WHERE a.run_id = %(run_id)s AND a.step_name = %(name)s
  AND a.outcome IN ('failed', 'input_error', 'timeout')
  AND a.created_at >= s.started_at;

-- get_run_plan --
-- The plan of the revision a run is bound to.
SELECT coalesce(r.plan, v.plan) AS plan FROM runs r
JOIN revisions v ON v.pipeline_id = r.pipeline_id AND v.number = r.revision
WHERE r.id = %(run_id)s;

-- lock_purgeable_run --
-- The oldest finished run past the retention whose outputs are not purged yet and that no
-- attempt still works on (a canceled run's executor stops at its next batch boundary).
SELECT r.id, coalesce(r.plan, v.plan) AS plan
FROM runs r
JOIN revisions v ON v.pipeline_id = r.pipeline_id AND v.number = r.revision
WHERE r.purged_at IS NULL AND r.status IN ('succeeded', 'failed', 'canceled')
  AND r.finished_at <= now() - make_interval(secs => %(older_than_s)s)
  AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = r.id AND a.outcome IS NULL)
  AND r.id <> ALL(%(skip)s::uuid[])
ORDER BY r.finished_at
LIMIT 1
FOR NO KEY UPDATE OF r SKIP LOCKED;

-- delete_run_batches --
-- Every committed output batch of a run's steps.
DELETE FROM step_batches WHERE run_id = %(run_id)s;

-- drop_checkpoint_state --
-- A purged run's checkpoints keep their input positions but lose the transform state (an
-- aggregate's groups), which only a resume could use.
UPDATE step_runs SET checkpoint = checkpoint - 'state'
WHERE run_id = %(run_id)s AND checkpoint ? 'state';

-- mark_run_purged --
-- The run's intermediate outputs are gone (a failed run can no longer be resumed).
UPDATE runs SET purged_at = now() WHERE id = %(run_id)s;

-- lock_run_steps --
-- Every step of a run with its status and checkpoint, locked in the advancer's order: what
-- an executor reads to form a fused group (dag.fusion_group) and to adopt its followers.
SELECT name, status, checkpoint, batches
FROM step_runs
WHERE run_id = %(run_id)s
ORDER BY position
FOR NO KEY UPDATE;

-- adopt_step --
-- A pending step joins a fused group: it runs from now on, inside its head's attempt. Not
-- when an earlier attempt of it ran on an executor that saw other export or reject
-- directories than the group's (see claim_attempt): it stays pending for its own attempt.
UPDATE step_runs s
SET status = 'running', retry_at = NULL, started_at = coalesce(started_at, now()),
    finished_at = NULL, error = NULL
WHERE run_id = %(run_id)s AND name = %(name)s AND status = 'pending'
  AND NOT EXISTS (
      SELECT 1 FROM attempts p, executors me
      WHERE p.run_id = s.run_id AND p.step_name = s.name AND me.owner = %(owner)s
        AND (p.export_mark <> me.export_mark OR p.reject_mark <> me.reject_mark))
RETURNING name;

-- create_fused_attempt --
-- A fused follower's attempt, claimed at once by the executor of its head's attempt, with
-- the marks of the directories that executor sees.
INSERT INTO attempts (run_id, step_name, number, fused_into, lease_owner, executor,
                      lease_expires_at, heartbeat_at, started_at, export_mark, reject_mark)
SELECT %(run_id)s, %(name)s, coalesce(max(number), 0) + 1, %(head)s, %(owner)s, %(owner)s,
       now() + make_interval(secs => %(ttl_s)s), now(), now(),
       (SELECT export_mark FROM executors WHERE owner = %(owner)s),
       (SELECT reject_mark FROM executors WHERE owner = %(owner)s)
FROM attempts WHERE run_id = %(run_id)s AND step_name = %(name)s
RETURNING id, number;

-- unfuse_step --
-- A fused follower whose group stopped without it waits again: the advancer or the next
-- attempt of its head starts it from its checkpoint.
UPDATE step_runs SET status = 'pending'
WHERE run_id = %(run_id)s AND name = %(name)s AND status = 'running';

-- list_stalled_runs --
-- Running runs with nothing runnable for longer than the given time: no open attempt, no
-- retry to come, nothing finished lately. After an advance none should exist; one that does
-- is a defect the sweep ends instead of letting it hold its pipeline and a global slot.
SELECT r.id, r.pipeline_id, r.trace_id FROM runs r
WHERE r.status = 'running'
  AND (%(run_id)s::uuid IS NULL OR r.id = %(run_id)s::uuid)
  AND r.started_at < now() - make_interval(secs => %(after_s)s)
  AND NOT EXISTS (SELECT 1 FROM attempts a
                  WHERE a.run_id = r.id
                    AND (a.outcome IS NULL
                         OR a.finished_at > now() - make_interval(secs => %(after_s)s)))
  AND NOT EXISTS (SELECT 1 FROM step_runs s
                  WHERE s.run_id = r.id
                    AND (s.retry_at > now() - make_interval(secs => %(after_s)s)
                         OR s.finished_at > now() - make_interval(secs => %(after_s)s)));

-- end_stalled_steps --
-- The started steps of a stalled run (or, with none, its pending ones) fail naming why;
-- the advancer then settles the steps below them and ends the run.
UPDATE step_runs s
SET status = 'failed', finished_at = now(), retry_at = NULL,
    error = 'stalled: nothing was runnable for ' || %(after_s)s::text || ' s'
WHERE s.run_id = %(run_id)s
  AND (s.status IN ('running', 'retry_wait')
       OR (s.status = 'pending'
           AND NOT EXISTS (SELECT 1 FROM step_runs o WHERE o.run_id = s.run_id
                           AND o.status IN ('running', 'retry_wait'))));

-- lock_uncleared_run --
-- The oldest finished run whose unpublished stages were not removed yet (skipping those a
-- pass failed on), locked against a resume; its plan, and its steps that did not succeed.
SELECT r.id, coalesce(r.plan, v.plan) AS plan,
       ARRAY(SELECT s.name FROM step_runs s
             WHERE s.run_id = r.id AND s.status <> 'succeeded' ORDER BY s.position) AS unpublished
FROM runs r
JOIN revisions v ON v.pipeline_id = r.pipeline_id AND v.number = r.revision
WHERE NOT r.stages_cleared AND r.status IN ('succeeded', 'failed', 'canceled')
  AND NOT (r.id = ANY(%(skip)s::uuid[]))
ORDER BY r.finished_at
LIMIT 1
FOR NO KEY UPDATE OF r SKIP LOCKED;

-- mark_stages_cleared --
-- A finished run's unpublished stages are gone.
UPDATE runs SET stages_cleared = true WHERE id = %(run_id)s;

-- lock_metric_totals --
-- One writer of the totals at a time: the fold, or the delete of a pipeline's series
-- (migration 0013), until the transaction ends.
SELECT pg_advisory_xact_lock(hashtext('etl.metric_totals'));

-- fold_metric_deltas --
-- Move every visible metric delta into the totals, in one transaction (a scrape reading both
-- in one snapshot sees each delta exactly once). Timestamps keep the greatest value.
WITH moved AS (
    DELETE FROM metric_deltas RETURNING family, labels, value
)
INSERT INTO metric_totals AS t (family, labels, value)
SELECT family, labels,
       CASE WHEN right(family, 18) = '_timestamp_seconds' THEN max(value) ELSE sum(value) END
FROM moved
GROUP BY family, labels
ON CONFLICT (family, labels) DO UPDATE
SET value = CASE WHEN right(t.family, 18) = '_timestamp_seconds'
                 THEN greatest(t.value, excluded.value)
                 ELSE t.value + excluded.value END;

-- forget_gone_executors --
-- Executors that stopped or stopped beating a day ago are forgotten.
DELETE FROM executors WHERE coalesce(stopped_at, heartbeat_at) < now() - interval '1 day';

-- lock_executor_announcements --
-- One executor at a time announces itself and compares its directories with the live ones'
-- (two starting at once with different directories: the second sees the first).
SELECT pg_advisory_xact_lock(hashtext('etl.announce_executor'));

-- announce_executor --
-- An executor starts: its row holds this incarnation and the marks of the directories it
-- sees, beating from now on.
INSERT INTO executors (name, owner, pid, stale_after_s, export_mark, reject_mark)
VALUES (%(name)s, %(owner)s, %(pid)s, %(stale_after_s)s, %(export_mark)s, %(reject_mark)s)
ON CONFLICT (name) DO UPDATE
SET owner = excluded.owner, pid = excluded.pid, stale_after_s = excluded.stale_after_s,
    export_mark = excluded.export_mark, reject_mark = excluded.reject_mark,
    started_at = now(), heartbeat_at = now(), stopped_at = NULL;

-- find_directory_mismatches --
-- Live executors (not stopped, beating within their stale limit) that see another export or
-- reject directory than this one; those of an earlier version (no marks) prove nothing.
SELECT name, export_mark, reject_mark
FROM executors
WHERE name <> %(name)s AND stopped_at IS NULL
  AND now() - heartbeat_at <= make_interval(secs => stale_after_s)
  AND (export_mark <> %(export_mark)s OR reject_mark <> %(reject_mark)s)
ORDER BY name;

-- beat_executor --
-- An executor is alive (whether or not it runs a step).
UPDATE executors SET heartbeat_at = now() WHERE name = %(name)s AND owner = %(owner)s;

-- retire_executor --
-- An executor stopped cleanly.
UPDATE executors SET stopped_at = now() WHERE name = %(name)s AND owner = %(owner)s;
