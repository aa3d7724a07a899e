-- Named queries of the list endpoints (service/domain/listing.py): keyset pages, newest first, of
-- summaries (never a plan). Each takes `limit` (the caller asks for one row more than it
-- shows, to know whether a next page exists) and a cursor: the sort key of the last row
-- shown (`before_*`, all null for the first page). Ties in a timestamp are broken by the id,
-- so every row is shown exactly once across pages.

-- list_pipeline_summaries --
-- Live pipelines newest first (optionally one by exact name): current revision, paused, step count, last run, schedules.
SELECT p.id, p.name, p.revision, p.paused, p.created_at, p.updated_at,
       jsonb_array_length(v.plan -> 'steps') AS steps,
       lr.id AS last_run_id, lr.status AS last_run_status, lr.created_at AS last_run_created_at,
       lr.finished_at AS last_run_finished_at,
       sc.schedules, sc.next_fire_at
FROM pipelines p
JOIN revisions v ON v.pipeline_id = p.id AND v.number = p.revision
LEFT JOIN LATERAL (
    SELECT r.id, r.status, r.created_at, r.finished_at FROM runs r
    WHERE r.pipeline_id = p.id
    ORDER BY r.created_at DESC, r.id DESC LIMIT 1) lr ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS schedules, min(s.next_fire_at) AS next_fire_at FROM schedules s
    WHERE s.pipeline_id = p.id AND s.deleted_at IS NULL) sc ON true
WHERE p.deleted_at IS NULL
  AND (%(name)s::text IS NULL OR p.name = %(name)s::text)
  AND (%(before_at)s::timestamptz IS NULL
       OR (p.created_at, p.id) < (%(before_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY p.created_at DESC, p.id DESC
LIMIT %(limit)s;

-- list_revision_summaries --
-- A pipeline's revisions, newest first: number, author, time and step count.
SELECT pipeline_id, number, created_by, created_at,
       jsonb_array_length(plan -> 'steps') AS steps
FROM revisions
WHERE pipeline_id = %(pipeline_id)s
  AND (%(before_number)s::integer IS NULL OR number < %(before_number)s::integer)
ORDER BY number DESC
LIMIT %(limit)s;

-- list_run_summaries --
-- Runs newest first, filtered by statuses, pipeline and creation time: counts of steps by status instead of the steps.
SELECT r.id, r.pipeline_id, p.name AS pipeline_name, p.deleted_at IS NOT NULL AS pipeline_deleted,
       r.revision, r.status, r.reason,
       r.trigger_key, r.trace_id, r.cancel_requested, r.created_by, r.created_at,
       r.started_at, r.finished_at, r.purged_at, r.params,
       CASE WHEN r.status = 'queued' THEN (
           SELECT count(*) FROM runs q
           WHERE q.pipeline_id = r.pipeline_id AND q.status = 'queued'
             AND q.queue_seq <= r.queue_seq) END AS queue_position,
       sc.step_counts, sc.records_out, sc.rejected,
       CASE WHEN sc.step_counts IS NULL THEN (
           SELECT jsonb_array_length(v.plan -> 'steps') FROM revisions v
           WHERE v.pipeline_id = r.pipeline_id AND v.number = r.revision) END AS plan_steps,
       (SELECT 'step ' || f.name || ': ' || f.error FROM step_runs f
        WHERE f.run_id = r.id AND f.status = 'failed'
        ORDER BY f.position LIMIT 1) AS error
FROM runs r
JOIN pipelines p ON p.id = r.pipeline_id
LEFT JOIN LATERAL (
    SELECT jsonb_object_agg(c.status, c.n) AS step_counts, sum(c.records_out) AS records_out,
           sum(c.rejected) AS rejected
    FROM (SELECT s.status, count(*) AS n, sum(s.records_out) AS records_out,
                 sum(s.rejected) AS rejected
          FROM step_runs s WHERE s.run_id = r.id GROUP BY s.status) c
    HAVING count(*) > 0) sc ON true
WHERE (%(statuses)s::text[] IS NULL OR r.status = ANY(%(statuses)s::text[]))
  AND (%(pipeline_id)s::uuid IS NULL OR r.pipeline_id = %(pipeline_id)s::uuid)
  AND (%(created_from)s::timestamptz IS NULL OR r.created_at >= %(created_from)s::timestamptz)
  AND (%(created_before)s::timestamptz IS NULL OR r.created_at < %(created_before)s::timestamptz)
  AND (%(before_at)s::timestamptz IS NULL
       OR (r.created_at, r.id) < (%(before_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY r.created_at DESC, r.id DESC
LIMIT %(limit)s;

-- list_schedule_summaries --
-- A pipeline's live (not deleted) schedules, newest first; a watch schedule with its files
-- waiting for room.
SELECT s.id, s.pipeline_id, s.every_minutes, s.daily_at, s.watch, s.anchor_at, s.next_fire_at,
       s.last_fired_at, s.last_run_id, s.last_skip_reason, s.catchup, s.created_at,
       (SELECT count(*) FROM watched_files w
        WHERE s.watch IS NOT NULL AND w.schedule_id = s.id AND w.admitted_at IS NULL)
           AS files_pending
FROM schedules s
WHERE s.pipeline_id = %(pipeline_id)s AND s.deleted_at IS NULL
  AND (%(before_at)s::timestamptz IS NULL
       OR (s.created_at, s.id) < (%(before_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY s.created_at DESC, s.id DESC
LIMIT %(limit)s;

-- list_backfill_summaries --
-- A pipeline's backfills newest first with their counters (no values: `get_backfill` has them).
SELECT b.id, b.pipeline_id, b.param, b.value_from, b.value_to, b.total, b.created_by,
       b.created_at, b.canceled_at, b.schedule_id,
       count(*) FILTER (WHERE r.status = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE r.status IN ('failed', 'canceled', 'skipped')) AS failed,
       count(*) FILTER (WHERE v.run_id IS NULL AND b.canceled_at IS NULL) AS pending,
       count(*) FILTER (WHERE r.status IN ('queued', 'running')) AS active
FROM (SELECT * FROM backfills
      WHERE pipeline_id = %(pipeline_id)s
        AND (%(before_at)s::timestamptz IS NULL
             OR (created_at, id) < (%(before_at)s::timestamptz, %(before_id)s::uuid))
      ORDER BY created_at DESC, id DESC LIMIT %(limit)s) b
JOIN backfill_values v ON v.backfill_id = b.id
LEFT JOIN runs r ON r.id = v.run_id
GROUP BY b.id, b.pipeline_id, b.param, b.value_from, b.value_to, b.total, b.created_by,
         b.created_at, b.canceled_at, b.schedule_id
ORDER BY b.created_at DESC, b.id DESC;

-- list_webhook_summaries --
-- A pipeline's live webhooks newest first, never the secret, each with its latest delivery.
SELECT w.id, w.pipeline_id, w.url, w.events, w.created_by, w.created_at,
       CASE WHEN d.id IS NULL THEN NULL ELSE jsonb_build_object(
           'event_id', d.event_id, 'event', d.event, 'run_id', d.run_id, 'status', d.status,
           'attempts', d.attempts, 'last_status_code', d.last_status_code,
           'last_error', d.last_error, 'created_at', webhook_utc_text(d.created_at),
           'last_attempt_at', webhook_utc_text(d.last_attempt_at),
           'next_attempt_at', CASE WHEN d.status = 'pending'
                                   THEN webhook_utc_text(d.next_attempt_at) END,
           'delivered_at', webhook_utc_text(d.delivered_at)) END AS last_delivery
FROM webhooks w
LEFT JOIN LATERAL (
    SELECT * FROM webhook_deliveries x WHERE x.webhook_id = w.id
    ORDER BY x.id DESC LIMIT 1) d ON true
WHERE w.pipeline_id = %(pipeline_id)s AND w.deleted_at IS NULL
  AND (%(before_at)s::timestamptz IS NULL
       OR (w.created_at, w.id) < (%(before_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY w.created_at DESC, w.id DESC
LIMIT %(limit)s;

-- list_audit_entries --
-- Audit rows newest first, optionally filtered by entity id, entity type, action and principal.
SELECT id, principal, action, entity_type, entity_id, details, trace_id, created_at
FROM audit
WHERE (%(entity_id)s::text IS NULL OR entity_id = %(entity_id)s::text)
  AND (%(entity_type)s::text IS NULL OR entity_type = %(entity_type)s::text)
  AND (%(action)s::text IS NULL OR action = %(action)s::text)
  AND (%(principal)s::text IS NULL OR principal = %(principal)s::text)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s;

-- list_token_summaries --
-- Tokens newest first, revoked ones too (never a hash).
SELECT id, name, role, created_at, last_used_at, expires_at, revoked_at
FROM principals
WHERE (%(before_at)s::timestamptz IS NULL
       OR (created_at, id) < (%(before_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s;
