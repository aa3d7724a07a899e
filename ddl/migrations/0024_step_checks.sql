-- Data checks on a step's output (issue 35): each step's results (`dag.checks`, shown by
-- GET /runs/{id}), and the keys of its `unique` checks, one row per output record, written
-- in the batch's own commit (`actors.checks`) so that they always match the step's
-- checkpoint and no executor holds more than one batch of keys in memory. The rows go with
-- their run (purge).
ALTER TABLE step_runs ADD COLUMN checks jsonb NOT NULL DEFAULT '[]';

CREATE TABLE step_check_keys (
    run_id    uuid NOT NULL,
    step_name text NOT NULL,
    check_no  smallint NOT NULL,   -- index of the check in the step's `checks`
    ordinal   bigint NOT NULL,     -- the record's number in the step's output (1, 2, ...)
    key_hash  bigint NOT NULL,     -- 64-bit BLAKE2b digest of the key (`dag.checks.key_digests`)
    key       text NOT NULL,       -- the key as JSON, at most 200 characters (for examples)
    PRIMARY KEY (run_id, step_name, check_no, ordinal),
    FOREIGN KEY (run_id, step_name) REFERENCES step_runs (run_id, name) ON DELETE CASCADE
);
