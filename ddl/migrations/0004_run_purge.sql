-- Retention: a finished run's intermediate outputs (step batches, export staging, reject
-- chunks) are purged some days after it finished (actors/purge.py); the run, its steps,
-- attempts and published exports stay. A purged failed run can no longer be resumed.
ALTER TABLE runs ADD COLUMN purged_at timestamptz;
CREATE INDEX runs_purgeable ON runs (finished_at)
    WHERE purged_at IS NULL AND status IN ('succeeded', 'failed', 'canceled');
