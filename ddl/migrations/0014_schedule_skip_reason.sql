-- Why a schedule's fire made no run (issue 22, items 4 and 5): a paused pipeline's schedules
-- create no runs, and a fire of a revision that is no valid plan makes none either; the fire
-- is still recorded (service/domain/schedules.py, `record_schedule_fire`), now with its
-- reason. NULL when the newest fire admitted a run (created, existing or skipped by
-- admission); like `last_run_id`, a late duplicate of an older fire never moves it back.
ALTER TABLE schedules ADD COLUMN last_skip_reason text
    CHECK (last_skip_reason IN ('paused', 'plan_invalid'));

-- A fire without a run counts under its reason (`paused`, `plan_invalid`) instead of
-- `no_run` (migration 0009), and a paused pipeline's fire is a skipped trigger too
-- (`etl_triggers_skipped_total{reason="paused"}`; no run, so `etl_runs_total` does not move).
-- The trigger of 0009 (`schedules_metrics_no_run`) calls this function and stays.
CREATE OR REPLACE FUNCTION metrics_fire_without_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO metric_deltas (family, labels, value)
    SELECT 'etl_schedule_fires_total',
           jsonb_build_object('pipeline', p.name,
                              'outcome', coalesce(NEW.last_skip_reason, 'no_run')), 1
    FROM pipelines p WHERE p.id = NEW.pipeline_id
    UNION ALL
    SELECT 'etl_triggers_skipped_total',
           jsonb_build_object('pipeline', p.name, 'reason', 'paused'), 1
    FROM pipelines p WHERE p.id = NEW.pipeline_id AND NEW.last_skip_reason = 'paused';
    RETURN NULL;
END $$;
