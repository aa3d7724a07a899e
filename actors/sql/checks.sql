-- Queries of a step's data contract: its checks (`actors.checks`: the keys of its `unique`
-- checks, its results) and the schema drift of a file ingest (`actors.schemadrift`).

-- stage_check_keys --
-- One batch's keys of one `unique` check, sent in the batch's commit (`StagedRows`): the
-- digests and lines as array literals, the keys as one JSON array (no per-value quoting on
-- either side); the final records of an aggregate, written again by a later attempt, are
-- kept once.
INSERT INTO step_check_key_batches
    (run_id, step_name, check_no, first_ordinal, hashes, keys, lines)
VALUES (%(run_id)s, %(step)s, %(check_no)s, %(first)s, %(hashes)s::bigint[], %(keys)s::json,
        %(lines)s::bigint[])
ON CONFLICT DO NOTHING;

-- clear_check_keys --
-- A step that starts from scratch drops the keys an earlier attempt committed.
DELETE FROM step_check_key_batches WHERE run_id = %(run_id)s AND step_name = %(step)s;

-- count_duplicate_keys --
-- The records of a `unique` check whose key an earlier record has, and the first repeated
-- keys (in output order) with how many records hold each, the first of them and its line.
WITH k AS (
    SELECT b.first_ordinal + t.i - 1 AS ordinal, t.h
    FROM step_check_key_batches b, unnest(b.hashes) WITH ORDINALITY AS t(h, i)
    WHERE b.run_id = %(run_id)s AND b.step_name = %(step)s AND b.check_no = %(check_no)s
), dup AS (
    SELECT h, count(*) AS n, min(ordinal) AS first
    FROM k GROUP BY h HAVING count(*) > 1
), shown AS (
    SELECT d.first, d.n, b.keys -> (d.first - b.first_ordinal)::int AS key,
           b.lines[d.first - b.first_ordinal + 1] AS line
    FROM (SELECT * FROM dup ORDER BY first LIMIT %(examples)s) d
    JOIN step_check_key_batches b
      ON b.run_id = %(run_id)s AND b.step_name = %(step)s AND b.check_no = %(check_no)s
     AND d.first >= b.first_ordinal AND d.first < b.first_ordinal + cardinality(b.hashes)
)
SELECT (SELECT coalesce(sum(n - 1), 0) FROM dup)::bigint AS repeated,
       (SELECT coalesce(json_agg(json_strip_nulls(json_build_object(
                                     'key', key, 'records', n, 'first_record', first,
                                     'first_line', line)) ORDER BY first),
                        '[]'::json) FROM shown) AS examples;

-- save_check_results --
-- The results of a step's checks, kept with the step while its attempt still holds it.
UPDATE step_runs SET checks = %(checks)s
WHERE run_id = %(run_id)s AND name = %(step)s AND status = 'running';

-- get_previous_columns --
-- A step's output columns in the pipeline's last succeeded run before this one.
SELECT s.run_id, s.columns
FROM runs r
JOIN step_runs s ON s.run_id = r.id AND s.name = %(step)s
WHERE r.pipeline_id = (SELECT pipeline_id FROM runs WHERE id = %(run_id)s)
  AND r.status = 'succeeded' AND r.id <> %(run_id)s AND s.columns IS NOT NULL
ORDER BY r.finished_at DESC
LIMIT 1;

-- save_schema_change --
-- The columns a file ingest's input added or removed since that run.
UPDATE step_runs SET schema_change = %(change)s
WHERE run_id = %(run_id)s AND name = %(step)s;
