-- Tracing (docs/tracing.md): a run's spans are children of its trigger span, which may live
-- in another process (the API's, the scheduler's), so the run keeps that span's id and its
-- W3C sampled flag next to its trace id. Runs made before this migration get a stand-in
-- parent id (the low half of their trace id), so every run answers with a `traceparent`.
ALTER TABLE runs
    ADD COLUMN parent_span_id text CHECK (parent_span_id ~ '^[0-9a-f]{16}$'
                                          AND parent_span_id <> '0000000000000000'),
    ADD COLUMN trace_sampled boolean NOT NULL DEFAULT true;
UPDATE runs SET parent_span_id = substr(trace_id, 17, 16)
 WHERE trace_id ~ '^[0-9a-f]{32}$' AND substr(trace_id, 17, 16) <> '0000000000000000';
