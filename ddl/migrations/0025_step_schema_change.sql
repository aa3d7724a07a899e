-- Schema drift of a file ingest (issue 35): the columns its input added or removed since
-- the pipeline's last succeeded run, `{"added": [...], "removed": [...], "since_run": ID}`,
-- recorded whatever `on_schema_change` made of it; NULL when nothing changed.
ALTER TABLE step_runs ADD COLUMN schema_change jsonb;
