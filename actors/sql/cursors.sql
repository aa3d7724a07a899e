-- Queries of incremental table ingest (`actors.cursors`): the range a run's step reads,
-- fixed once, and the pipeline's mark, advanced when the run succeeds.

-- get_cursor_range --
-- The range a run's step fixed when it first started (none yet: no row).
SELECT table_name, column_name, lower_value, lower_snapshot, upper_value, snapshot, late_rows
FROM step_cursor_ranges
WHERE run_id = %(run_id)s AND step_name = %(step)s;

-- get_cursor_mark --
-- The pipeline's mark for a step: value, snapshot, version, table and column.
SELECT m.value, m.snapshot, m.version, m.table_name, m.column_name
FROM cursor_marks m
WHERE m.pipeline_id = (SELECT pipeline_id FROM runs WHERE id = %(run_id)s)
  AND m.step_name = %(step)s;

-- save_cursor_range --
-- The range of a run's step; the first one saved stays (a stale or concurrent attempt's
-- range is dropped, and it reads the saved one).
INSERT INTO step_cursor_ranges (run_id, step_name, table_name, column_name, lower_value,
    lower_snapshot, mark_version, upper_value, snapshot, late_rows)
VALUES (%(run_id)s, %(step)s, %(table)s, %(column)s, %(lower)s, %(lower_snapshot)s,
    %(version)s, %(upper)s, %(snapshot)s, %(late_rows)s)
ON CONFLICT (run_id, step_name) DO NOTHING;

-- advance_cursor_marks --
-- In the transaction that ends a run succeeded: each cursor ingest's mark becomes the
-- bound of its range, if the mark is still the one the range started from (absent then and
-- now, or the same version); an admin's set or reset meanwhile is kept.
INSERT INTO cursor_marks AS m (pipeline_id, step_name, table_name, column_name, value,
    snapshot, run_id, updated_by)
SELECT r.pipeline_id, c.step_name, c.table_name, c.column_name, c.upper_value, c.snapshot,
       r.id, 'run ' || r.id
FROM step_cursor_ranges c
JOIN runs r ON r.id = c.run_id
WHERE c.run_id = %(run_id)s AND r.status = 'succeeded'
  AND (c.mark_version IS NULL) = NOT EXISTS (
      SELECT 1 FROM cursor_marks x
      WHERE x.pipeline_id = r.pipeline_id AND x.step_name = c.step_name)
ON CONFLICT (pipeline_id, step_name) DO UPDATE
SET table_name = excluded.table_name, column_name = excluded.column_name,
    value = excluded.value, snapshot = excluded.snapshot, run_id = excluded.run_id,
    updated_by = excluded.updated_by, updated_at = now(),
    version = nextval('cursor_mark_versions')
WHERE m.version = (SELECT mark_version FROM step_cursor_ranges
                   WHERE run_id = %(run_id)s AND step_name = m.step_name);
