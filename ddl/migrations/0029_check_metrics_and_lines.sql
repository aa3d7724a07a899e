-- Data checks (issue 35), what 0024 left out: the keys of a `unique` check one row per
-- output batch, with where each record starts in a file ingest's input, and the counter
-- `etl_checks_total`.
--
-- `step_check_key_batches` replaces `step_check_keys` (one row per record: its inserts and
-- their index cost a 100,000-record step more than half its time; bench/checks_cost.py). A
-- batch's keys are arrays in one row written in the batch's own commit (`actors.checks`),
-- the record at index i (1-based) being the output record `first_ordinal + i - 1`; the
-- repeated keys are counted over the unnested arrays at the end. `lines`: the physical
-- line of each record's start in the input file (NULL for a step that does not read a
-- file); a `unique` example shows the first record's line. The rows go with their run.
CREATE TABLE step_check_key_batches (
    run_id        uuid NOT NULL,
    step_name     text NOT NULL,
    check_no      smallint NOT NULL,   -- index of the check in the step's `checks`
    first_ordinal bigint NOT NULL,     -- the batch's first record's number in the output
    hashes        bigint[] NOT NULL,   -- 64-bit BLAKE2b digests of the keys (`dag.checks`)
    keys          json NOT NULL,       -- the keys, a JSON array (a long key: its text cut)
    lines         bigint[],
    PRIMARY KEY (run_id, step_name, check_no, first_ordinal),
    FOREIGN KEY (run_id, step_name) REFERENCES step_runs (run_id, name) ON DELETE CASCADE
);
-- The keys of steps in flight when this migration runs, each a batch of one record whose
-- key is its 0024 text as a JSON string (an example shows it as its array, or cut where
-- 0024 cut it: `actors.checks`).
INSERT INTO step_check_key_batches (run_id, step_name, check_no, first_ordinal, hashes, keys)
SELECT run_id, step_name, check_no, ordinal, ARRAY[key_hash], json_build_array(key)
FROM step_check_keys;
DROP TABLE step_check_keys;

-- `etl_checks_total{pipeline, step, check, outcome}`: one per check result of a step that
-- ended `succeeded` or `failed` (`check` is the kind, `outcome` passed / failed / warned),
-- counted by the step's final status change, as `etl_steps_total` is (migration 0009).
CREATE FUNCTION metric_check_facts(s step_runs)
RETURNS TABLE (family text, labels jsonb, value float8) LANGUAGE sql STABLE AS $$
    SELECT 'etl_checks_total',
           jsonb_build_object('pipeline', p.name, 'step', s.name,
                              'check', c ->> 'check', 'outcome', c ->> 'outcome'),
           count(*)::float8
    FROM runs r JOIN pipelines p ON p.id = r.pipeline_id,
         jsonb_array_elements(s.checks) c
    WHERE r.id = s.run_id AND s.status IN ('succeeded', 'failed')
      AND c ->> 'check' IS NOT NULL AND c ->> 'outcome' IS NOT NULL
    GROUP BY p.name, c ->> 'check', c ->> 'outcome'
$$;

CREATE FUNCTION metrics_checks_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO metric_deltas (family, labels, value) SELECT * FROM metric_check_facts(NEW);
    RETURN NULL;
END $$;
CREATE TRIGGER step_runs_checks_metrics AFTER UPDATE OF status ON step_runs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                       AND NEW.status IN ('succeeded', 'failed')
                       AND NEW.checks <> '[]'::jsonb)
    EXECUTE FUNCTION metrics_checks_changed();

-- The checks of the steps that ended before this migration, counted once.
INSERT INTO metric_totals (family, labels, value)
SELECT m.family, m.labels, sum(m.value)
FROM step_runs s, metric_check_facts(s) m
WHERE s.checks <> '[]'::jsonb
GROUP BY m.family, m.labels
ON CONFLICT (family, labels) DO UPDATE SET value = metric_totals.value + EXCLUDED.value;
