-- A run can fail before any of its steps runs: its revision no longer passes validation
-- (accepted by an older release, or written by hand). The run keeps why, naming the
-- revision and the validator's messages; a step's failure stays on the step.
ALTER TABLE runs ADD COLUMN error text;
