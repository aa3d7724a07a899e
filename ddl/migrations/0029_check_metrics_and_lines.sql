-- Data checks (issue 35), what 0024 left out: where a repeated key of a `unique` check
-- starts in a file ingest's input, and the counter `etl_checks_total`.
--
-- `line`: the physical line of the record's start in the input file (NULL for a step that
-- does not read a file); a `unique` example shows the first record's line.
ALTER TABLE step_check_keys ADD COLUMN line bigint;

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
