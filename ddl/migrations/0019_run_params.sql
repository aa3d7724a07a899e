-- Run parameters (issue 33): the values a run was triggered with, its plan's defaults and
-- the built-ins (`run_id`, a scheduled fire's interval) applied, fixed for the run's life;
-- a resume keeps them and a rerun copies them to its new run. `plan` is the run's revision
-- plan with those values substituted into its placeholders (dag/params.py), NULL when the
-- plan has none: the engine reads `coalesce(runs.plan, revisions.plan)` and never
-- substitutes again. Older runs get their one built-in.
ALTER TABLE runs ADD COLUMN params jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE runs ADD COLUMN plan jsonb;
UPDATE runs SET params = jsonb_build_object('run_id', id::text);

CREATE FUNCTION runs_params_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a run''s params and plan are immutable';
END $$;
CREATE TRIGGER runs_params_immutable BEFORE UPDATE OF params, plan ON runs
    FOR EACH ROW WHEN (OLD.params IS DISTINCT FROM NEW.params OR OLD.plan IS DISTINCT FROM NEW.plan)
    EXECUTE FUNCTION runs_params_immutable();
