-- Queries of a step's data contract: its checks (`actors.checks`: the keys of its `unique`
-- checks, its results) and the schema drift of a file ingest (`actors.schemadrift`).

-- stage_check_keys --
-- One batch's keys of one `unique` check, sent in the batch's commit (`StagedRows`); the
-- final records of an aggregate, written again by a later attempt, are kept once.
INSERT INTO step_check_keys (run_id, step_name, check_no, ordinal, key_hash, key, line)
SELECT %(run_id)s, %(step)s, %(check_no)s, o, h, k, l
FROM unnest(%(ordinals)s::bigint[], %(hashes)s::bigint[], %(keys)s::text[],
            coalesce(%(lines)s::bigint[], '{}')) AS t(o, h, k, l)
WHERE o IS NOT NULL
ON CONFLICT DO NOTHING;

-- clear_check_keys --
-- A step that starts from scratch drops the keys an earlier attempt committed.
DELETE FROM step_check_keys WHERE run_id = %(run_id)s AND step_name = %(step)s;

-- count_duplicate_keys --
-- The records of a `unique` check whose key an earlier record has, and the first repeated
-- keys (in output order) with how many records hold each and the first of them.
WITH dup AS (
    SELECT key_hash, count(*) AS n, min(ordinal) AS first
    FROM step_check_keys
    WHERE run_id = %(run_id)s AND step_name = %(step)s AND check_no = %(check_no)s
    GROUP BY key_hash
    HAVING count(*) > 1
), shown AS (
    SELECT d.first, d.n, k.key, k.line
    FROM (SELECT * FROM dup ORDER BY first LIMIT %(examples)s) d
    JOIN step_check_keys k ON k.run_id = %(run_id)s AND k.step_name = %(step)s
         AND k.check_no = %(check_no)s AND k.ordinal = d.first
)
SELECT (SELECT coalesce(sum(n - 1), 0) FROM dup)::bigint AS repeated,
       (SELECT coalesce(json_agg(json_strip_nulls(json_build_object(
                                     'key', key::json, 'records', n, 'first_record', first,
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
