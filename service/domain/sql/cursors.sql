-- Queries of the cursor marks of incremental table ingest (`service.domain.cursors`).

-- list_cursor_marks --
-- A pipeline's marks.
SELECT step_name, table_name, column_name, value, run_id, updated_by, updated_at
FROM cursor_marks WHERE pipeline_id = %(pipeline_id)s;

-- lock_cursor_mark --
-- A mark, locked for its change (none: no row).
SELECT step_name, table_name, column_name, value, run_id, updated_by, updated_at
FROM cursor_marks WHERE pipeline_id = %(pipeline_id)s AND step_name = %(step)s FOR UPDATE;

-- set_cursor_mark --
-- An admin's mark: no snapshot (rows at or below it are not read), a new version (a run
-- that started from another mark does not advance it).
INSERT INTO cursor_marks AS m (pipeline_id, step_name, table_name, column_name, value,
    snapshot, run_id, updated_by)
VALUES (%(pipeline_id)s, %(step)s, %(table)s, %(column)s, %(value)s, NULL, NULL, %(principal)s)
ON CONFLICT (pipeline_id, step_name) DO UPDATE
SET table_name = excluded.table_name, column_name = excluded.column_name,
    value = excluded.value, snapshot = NULL, run_id = NULL, updated_by = excluded.updated_by,
    updated_at = now(), version = nextval('cursor_mark_versions')
RETURNING step_name, table_name, column_name, value, run_id, updated_by, updated_at;

-- delete_cursor_mark --
-- Reset: the next run reads from the start.
DELETE FROM cursor_marks WHERE pipeline_id = %(pipeline_id)s AND step_name = %(step)s
RETURNING value;
