-- Named queries of webhooks (service/domain/webhooks.py): what the API and the console change
-- and show, and the notifier's outbox (service/notifier.py). The outbox rows themselves are
-- written by the trigger of ddl/migrations/0011_webhooks.sql when a run ends. Every time is
-- on the database clock.

-- insert_webhook --
-- A new webhook of a pipeline (the secret is returned once, by the API's 201 answer).
INSERT INTO webhooks (id, pipeline_id, url, events, secret, created_by)
VALUES (%(id)s, %(pipeline_id)s, %(url)s, %(events)s, %(secret)s, %(created_by)s)
RETURNING id, pipeline_id, url, events, secret, created_by, created_at;

-- count_live_webhooks --
-- How many webhooks a pipeline has (the cap); its row is locked first by the caller.
SELECT count(*) AS n FROM webhooks WHERE pipeline_id = %(pipeline_id)s AND deleted_at IS NULL;

-- lock_live_pipeline --
-- Lock a live pipeline's row (the lock a pipeline's delete takes first): webhook creations of
-- one pipeline go one after the other, so the cap holds, and a creation waiting on a delete
-- finds the row deleted (no row) once the delete commits.
SELECT id FROM pipelines WHERE id = %(pipeline_id)s AND deleted_at IS NULL FOR NO KEY UPDATE;

-- delete_webhook --
-- Soft-delete a live webhook: nothing more is sent to it (its history stays).
UPDATE webhooks SET deleted_at = now()
WHERE id = %(webhook_id)s AND pipeline_id = %(pipeline_id)s AND deleted_at IS NULL
RETURNING id, url;

-- cancel_webhook_deliveries --
-- A deleted webhook's pending deliveries end; one being sent right now (locked) is left to
-- the notifier, which cancels it at its next claim.
UPDATE webhook_deliveries SET status = 'canceled', last_error = 'webhook deleted'
WHERE id IN (SELECT id FROM webhook_deliveries
             WHERE webhook_id = %(webhook_id)s AND status = 'pending'
             FOR UPDATE SKIP LOCKED);

-- delete_pipeline_webhooks --
-- A deleted pipeline's live webhooks are soft-deleted with it: nothing more is sent to them.
UPDATE webhooks SET deleted_at = now()
WHERE pipeline_id = %(pipeline_id)s AND deleted_at IS NULL
RETURNING id;

-- cancel_pipeline_deliveries --
-- The pending deliveries of a deleted pipeline's webhooks end; one being sent right now
-- (locked) is left to the notifier, which cancels it at its next claim.
UPDATE webhook_deliveries SET status = 'canceled', last_error = 'pipeline deleted'
WHERE id IN (SELECT d.id FROM webhook_deliveries d
             JOIN webhooks w ON w.id = d.webhook_id
             WHERE w.pipeline_id = %(pipeline_id)s AND d.status = 'pending'
             FOR UPDATE OF d SKIP LOCKED);

-- list_recent_deliveries --
-- The latest deliveries of a pipeline's live webhooks, newest first (the console's table).
SELECT d.id, d.event_id, d.event, d.run_id, d.status, d.attempts, d.last_status_code,
       d.last_error, d.created_at, d.last_attempt_at, d.delivered_at,
       CASE WHEN d.status = 'pending' THEN d.next_attempt_at END AS next_attempt_at,
       w.url
FROM webhook_deliveries d
JOIN webhooks w ON w.id = d.webhook_id
WHERE w.pipeline_id = %(pipeline_id)s AND w.deleted_at IS NULL
ORDER BY d.id DESC
LIMIT %(limit)s;

-- claim_due_delivery --
-- The oldest due pending delivery nobody holds, locked until the caller's transaction ends:
-- a coordinator that dies mid-POST loses its session and so the lock, and the next claim
-- (by the next coordinator) takes the row again, with the same event id and body.
SELECT d.id, d.event_id, d.event, d.run_id, d.run, d.body, d.attempts, d.webhook_id,
       w.url, w.secret, w.pipeline_id, w.deleted_at IS NOT NULL AS webhook_deleted
FROM webhook_deliveries d
JOIN webhooks w ON w.id = d.webhook_id
WHERE d.status = 'pending' AND d.next_attempt_at <= now()
ORDER BY d.next_attempt_at, d.id
LIMIT 1
FOR UPDATE OF d SKIP LOCKED;

-- set_delivery_body --
-- The body a delivery sends on every attempt, stored once before the first.
UPDATE webhook_deliveries SET body = %(body)s WHERE id = %(id)s AND body IS NULL;

-- record_delivered --
-- The receiver answered 2xx: delivered, never sent again.
UPDATE webhook_deliveries
SET status = 'delivered', attempts = attempts + 1, last_attempt_at = now(),
    delivered_at = now(), last_status_code = %(status_code)s, last_error = NULL
WHERE id = %(id)s;

-- record_attempt_failed --
-- An attempt failed: try again after the delay, or give up (status failed). The delay counts
-- from the attempt's end (the clock now), not from its claim (the transaction's start, up to
-- the POST timeout earlier).
UPDATE webhook_deliveries
SET attempts = attempts + 1, last_attempt_at = now(), last_status_code = %(status_code)s,
    last_error = %(error)s,
    status = CASE WHEN %(give_up)s THEN 'failed' ELSE 'pending' END,
    next_attempt_at = clock_timestamp() + make_interval(secs => %(delay_s)s)
WHERE id = %(id)s
RETURNING attempts;

-- cancel_delivery --
-- A delivery of a webhook deleted meanwhile ends without being sent.
UPDATE webhook_deliveries SET status = 'canceled', last_error = 'webhook deleted'
WHERE id = %(id)s;

-- purge_finished_deliveries --
-- Deliveries that ended (delivered, given up, canceled) before the retention go; pending stay.
DELETE FROM webhook_deliveries
WHERE status <> 'pending' AND created_at < now() - make_interval(secs => %(older_than_s)s);
