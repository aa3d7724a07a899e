-- Queries of the sandbox connectors: catalog look-ups for table ingest and the staged,
-- exactly-once table export. Blocks with `{name}` fields are templates: `table_source.py` and
-- `table_export.py` fill them with `psycopg2.sql.Identifier`/`Composed` parts only, never with
-- formatted strings.

-- get_relation --
-- A relation of a schema by exact name: its oid and kind ('r' table, 'p' partitioned, ...).
SELECT c.oid, c.relkind
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relname = %(name)s;

-- list_columns --
-- The live columns of a relation in order: name, base type name (domains unwrapped),
-- formatted type, NOT NULL, has a default.
SELECT a.attname,
       bt.typname,
       format_type(a.atttypid, a.atttypmod),
       a.attnotnull,
       a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> ''
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
JOIN pg_type bt ON bt.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
WHERE a.attrelid = %(oid)s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;

-- list_primary_key --
-- The primary-key columns of a relation, in key order (none: no primary key).
SELECT a.attname
FROM pg_index i
CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = %(oid)s AND i.indisprimary
ORDER BY k.ord;

-- lock_export_table --
-- Serialise prepares of one export table across executors (create / add column races).
SELECT pg_advisory_xact_lock(%(lock_key)s);

-- read_first_batch --
-- The first `limit` rows of a source table in primary-key order (within the cursor window
-- `{window}` of an incremental ingest, `true` for the others).
SELECT {select_list} FROM {table} AS src {horizon}
WHERE {window} ORDER BY {key} LIMIT %(limit)s;

-- read_next_batch --
-- The next `limit` rows after a key (keyset pagination: a row comparison on the primary key).
-- The key is qualified (`src.k`): a bare name would resolve to a `k::text AS k` output
-- column and sort as text while the comparison uses the real type.
SELECT {select_list} FROM {table} AS src {horizon}
WHERE ({key}) > ({after}) AND {window} ORDER BY {key} LIMIT %(limit)s;

-- fix_cursor_range --
-- The range of an incremental ingest, in one statement (one snapshot): that snapshot, the
-- highest cursor value it sees (never below the mark `lower`), and how many of its rows
-- are not above the mark but were not seen by the mark's snapshot (rows committed late).
SELECT pg_current_snapshot()::text,
       greatest(max({column}), CAST(%(lower)s AS {type}))::text,
       count(*) FILTER (WHERE %(lower)s::text IS NOT NULL AND {late})
FROM {table} AS src {horizon};

-- create_export_table --
-- The export table: the step's columns plus the run/step/record key.
CREATE TABLE IF NOT EXISTS {table} (
    {column_defs},
    run_id uuid NOT NULL,
    step_id text NOT NULL,
    record_key text NOT NULL,
    PRIMARY KEY (run_id, step_id, record_key)
);

-- add_export_column --
-- A step column the existing export table lacks (nullable: older rows have no value).
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {type};

-- create_staging_table --
-- The step's private staging table: invisible to readers of the export table. `{key}` is
-- `PRIMARY KEY` for an export with a key; without one (record keys are ordinals) it is
-- `NOT NULL`, no index, until `index_staging`.
CREATE TABLE IF NOT EXISTS {staging} (
    {column_defs},
    record_key text {key},
    {batch_seq} integer NOT NULL
);

-- index_staging --
-- The unique index on record_key of a key-less export's staging table, created if missing
-- at the start of every transaction of the export's own write path (`copy_staging` and
-- `upsert_staging` need it). The lock orders it against in-commit inserts and other writers.
LOCK TABLE {staging} IN SHARE ROW EXCLUSIVE MODE;
CREATE UNIQUE INDEX IF NOT EXISTS {index} ON {staging} (record_key);

-- create_batch_table --
-- This session's temporary table for one batch's COPY, emptied by every commit (created
-- once per connection and export: re-creating it per batch costs more than the upsert).
CREATE TEMPORARY TABLE IF NOT EXISTS {batch} ({column_defs}, record_key text NOT NULL)
ON COMMIT DELETE ROWS;

-- copy_batch --
-- Load one batch (CSV from memory) into the temporary table.
COPY {batch} ({columns}) FROM STDIN WITH (FORMAT csv);

-- copy_batch_typed --
-- The fast path's batch: every string quoted, numbers bare, a bare `nan` is NULL.
COPY {batch} ({columns}) FROM STDIN WITH (FORMAT csv, NULL 'nan');

-- copy_staging --
-- The happy path: a batch (typed CSV as `copy_batch_typed`, its seq last) straight into
-- staging; a key staged already fails it as a whole (unique violation, nothing written).
COPY {staging} ({columns}, {batch_seq}) FROM STDIN WITH (FORMAT csv, NULL 'nan');

-- stage_json --
-- A batch inside the caller's transaction (the batch's commit, `actors.committer`): its typed
-- records as one JSON array of objects keyed by column, its record keys as another, row i
-- of one with row i of the other, the batch seq last. A key staged already fails it as a
-- whole, as `copy_staging` does.
INSERT INTO {staging} ({columns}, record_key, {batch_seq})
SELECT {columns}, x.record_key, %(batch_seq)s
FROM ROWS FROM (json_to_recordset(%(records)s::json) AS ({column_defs}),
                json_array_elements_text(%(keys)s::json)) AS x({columns}, record_key);

-- stage_columns --
-- A batch inside the caller's transaction, as `stage_json` but a column at a time
-- (`connectors.commit_staging`): each column's values as one text split back into an array
-- (values apart at chr(31), a null chr(30)) and cast as a whole, its record keys last. The
-- arrays are unnested side by side in the select list, one row of each at a time: in
-- `ROWS FROM` each would first be copied whole into a tuple store.
INSERT INTO {staging} ({columns}, record_key, {batch_seq})
SELECT {arrays}, %(batch_seq)s;

-- upsert_staging --
-- Move the batch into staging. A key already staged by the same batch (re-run after a
-- crash) is updated; one staged by another batch is left alone and not returned (the
-- caller reports it as a duplicate key). The columns include record_key here.
INSERT INTO {staging} AS s ({columns}, {batch_seq})
SELECT {columns}, %(batch_seq)s FROM {batch}
ON CONFLICT (record_key) DO UPDATE SET {assignments}
WHERE s.{batch_seq} = EXCLUDED.{batch_seq}
RETURNING s.record_key;

-- count_staged_rows --
-- The rows of the committed batches a staging table holds (checked before an attempt goes on
-- from a checkpoint: fails with undefined_table when the staging table is gone).
SELECT count(*) FROM {staging}
WHERE %(n_batches)s::integer IS NULL OR {batch_seq} < %(n_batches)s::integer;

-- lock_staging --
-- Take the staging table for publish; fails with undefined_table once it was published.
LOCK TABLE {staging} IN EXCLUSIVE MODE;

-- insert_staging --
-- Insert the staged rows of the committed batches into the export table (the run's rows
-- are new there; a unique violation sends the caller to `publish_staging`).
INSERT INTO {table} ({columns}, run_id, step_id, record_key)
SELECT {columns}, %(run_id)s::uuid, %(step_id)s, record_key
FROM {staging}
WHERE %(n_batches)s::integer IS NULL OR {batch_seq} < %(n_batches)s::integer;

-- export_table_empty --
-- Whether the export table holds no row, before a publish asks for it alone (a table with
-- rows is never locked for that).
SELECT NOT EXISTS (SELECT 1 FROM {table});

-- lock_empty_export --
-- Take the export table alone for a publish that may build its primary key after the rows
-- (`connectors.empty_publish`); fails at once (lock_not_available) while another session
-- reads or writes it.
LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE NOWAIT;

-- empty_export_key --
-- The export table's primary key (constraint name, columns in key order) when the table
-- still holds no row under the lock, this session's role may alter it (owner), and the key
-- is plain: an ordinary table, no foreign key refers to it, its index has no options,
-- tablespace, included columns, replica identity or clustering. No row otherwise.
SELECT c.conname, array_agg(a.attname::text ORDER BY k.ord)
FROM pg_constraint c
JOIN pg_class t ON t.oid = c.conrelid
JOIN pg_index i ON i.indexrelid = c.conindid
JOIN pg_class x ON x.oid = i.indexrelid
CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
WHERE c.contype = 'p' AND NOT c.condeferrable
  AND t.relnamespace = %(schema)s::regnamespace AND t.relname = %(name)s AND t.relkind = 'r'
  AND pg_has_role(t.relowner, 'USAGE')
  AND x.reloptions IS NULL AND x.reltablespace = 0 AND i.indnkeyatts = i.indnatts
  AND NOT i.indisreplident AND NOT i.indisclustered
  AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE f.contype = 'f' AND f.confrelid = t.oid)
  AND NOT EXISTS (SELECT 1 FROM {table})
GROUP BY c.conname;

-- drop_export_key --
-- The empty export table's primary key, dropped until its rows are in (`add_export_key`).
ALTER TABLE {table} DROP CONSTRAINT {name};

-- add_export_key --
-- The primary key put back over the published rows: one sorted build of its index.
ALTER TABLE {table} ADD CONSTRAINT {name} PRIMARY KEY ({columns});

-- publish_staging --
-- Upsert the staged rows of the committed batches into the export table.
INSERT INTO {table} ({columns}, run_id, step_id, record_key)
SELECT {columns}, %(run_id)s::uuid, %(step_id)s, record_key
FROM {staging}
WHERE %(n_batches)s::integer IS NULL OR {batch_seq} < %(n_batches)s::integer
ON CONFLICT (run_id, step_id, record_key) DO UPDATE SET {assignments};

-- drop_staging --
-- Drop the step's staging table (after publish, or to discard an uncommitted step).
DROP TABLE IF EXISTS {staging};

-- count_run_rows --
-- The rows one step of one run published into an export table (the console's row count).
SELECT count(*) FROM {table} WHERE run_id = %(run_id)s::uuid AND step_id = %(step_id)s;

-- withdraw_run_rows --
-- Delete the rows one step of one run published (a step that did not succeed); how many.
WITH gone AS (
    DELETE FROM {table} WHERE run_id = %(run_id)s::uuid AND step_id = %(step_id)s RETURNING 1
)
SELECT count(*) FROM gone;

-- create_merge_table --
-- A merge export's table: the step's columns plus who wrote each row last, one row per
-- record key.
CREATE TABLE IF NOT EXISTS {table} (
    {column_defs},
    run_id uuid NOT NULL,
    step_id text NOT NULL,
    record_key text PRIMARY KEY
);

-- create_merge_undo --
-- A merge publish's undo table: the rows it overwrote, as they were (created in the publish's
-- transaction: its presence says the publish happened).
-- No index: it is written once per publish and read whole by a withdrawal.
CREATE TABLE IF NOT EXISTS {undo} (LIKE {table});

-- save_merge_undo --
-- Keep the rows the publish overwrites, as they are before it: the rows of the staged keys of
-- the committed batches that another run or step wrote (a publish done again keeps the first
-- image).
INSERT INTO {undo}
SELECT t.* FROM {table} t JOIN {staging} s ON s.record_key = t.record_key
WHERE (%(n_batches)s::integer IS NULL OR s.{batch_seq} < %(n_batches)s::integer)
  AND NOT (t.run_id = %(run_id)s::uuid AND t.step_id = %(step_id)s)
  AND NOT EXISTS (SELECT 1 FROM {undo} u WHERE u.record_key = t.record_key);

-- delete_merged --
-- Delete the keys of the staged rows of the committed batches that mark their key deleted
-- (`{deleted}`: FALSE without a delete column).
DELETE FROM {table} t USING {staging} s
WHERE s.record_key = t.record_key AND {deleted}
  AND (%(n_batches)s::integer IS NULL OR s.{batch_seq} < %(n_batches)s::integer);

-- merge_staging --
-- Upsert the other staged rows of the committed batches on the record key alone: the values
-- and the writer (run and step) of the publish win. The staged rows it applied, deletes
-- included.
WITH upserted AS (
    INSERT INTO {table} AS t ({columns}, run_id, step_id, record_key)
    SELECT {columns}, %(run_id)s::uuid, %(step_id)s, record_key
    FROM {staging} s
    WHERE NOT {deleted}
      AND (%(n_batches)s::integer IS NULL OR s.{batch_seq} < %(n_batches)s::integer)
    ON CONFLICT (record_key) DO UPDATE
    SET {assignments}, run_id = EXCLUDED.run_id, step_id = EXCLUDED.step_id
    RETURNING 1
)
SELECT (SELECT count(*) FROM upserted) + (
    SELECT count(*) FROM {staging} s
    WHERE {deleted}
      AND (%(n_batches)s::integer IS NULL OR s.{batch_seq} < %(n_batches)s::integer));

-- list_undo_columns --
-- The columns of a merge undo table, in order (a restore names them: the export table may have
-- gained columns since).
SELECT attname FROM pg_attribute
WHERE attrelid = %(oid)s AND attnum > 0 AND NOT attisdropped ORDER BY attnum;

-- withdraw_merge_rows --
-- A merge publish withdrawn: delete the rows the step wrote that nobody overwrote since, then
-- put back the rows it had overwritten unless a later writer holds their key. The rows the
-- step had written.
WITH gone AS (
    DELETE FROM {table} WHERE run_id = %(run_id)s::uuid AND step_id = %(step_id)s RETURNING 1
)
SELECT count(*) FROM gone;

-- restore_merge_undo --
INSERT INTO {table} ({columns})
SELECT {columns} FROM {undo} u
WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE t.record_key = u.record_key);
