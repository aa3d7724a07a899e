-- An executor that stops cleanly (SIGTERM) ends its attempt as `released` and hands the step
-- to a new attempt at once; unlike `lease_expired` it does not count as a lost lease.
ALTER TABLE attempts DROP CONSTRAINT attempts_outcome_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_outcome_check CHECK (outcome IS NULL OR outcome IN
    ('succeeded', 'failed', 'input_error', 'timeout', 'lease_expired', 'canceled',
     'superseded', 'released'));
