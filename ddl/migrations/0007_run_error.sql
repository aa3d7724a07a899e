-- A run can fail before any of its steps runs: its revision no longer passes validation
-- (accepted by an older release, or written by hand). The run keeps why, naming the
-- revision and the validator's messages; a step's failure stays on the step.
ALTER TABLE runs ADD COLUMN error text;

-- What a finished run's steps that did not succeed staged (export chunks, staging tables,
-- reject chunks) can never be published: the sweep removes it soon after the run ends and
-- marks the run, so the export directory and the sandbox hold no leftovers (a resume resets
-- the mark; its steps start over anyway).
ALTER TABLE runs ADD COLUMN stages_cleared boolean NOT NULL DEFAULT false;
CREATE INDEX runs_uncleared ON runs (finished_at)
    WHERE NOT stages_cleared AND status IN ('succeeded', 'failed', 'canceled');
