-- A paused pipeline admits no run (a trigger answers 409 pipeline_paused, a schedule fire
-- is recorded without a run); runs admitted before the pause go on.
ALTER TABLE pipelines ADD COLUMN paused boolean NOT NULL DEFAULT false;
