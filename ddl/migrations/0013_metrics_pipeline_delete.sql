-- A deleted pipeline's series leave the metrics with it (migration 0009 keeps them by
-- pipeline name): its kept totals and unfolded deltas go in the transaction that deletes
-- it, so churn of pipelines does not grow the scrape, and a new pipeline that takes the
-- name back starts its counters from zero (a counter reset, which Prometheus expects).
-- It takes the lock the sweep's fold takes (actors/sql/queries.sql, `fold_metric_deltas`):
-- a fold in flight commits first, so none of its rows outlives the delete, and the two
-- never wait on each other's rows in opposite orders.
CREATE FUNCTION metrics_pipeline_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('etl.metric_totals'));
    DELETE FROM metric_deltas WHERE labels ->> 'pipeline' = NEW.name;
    DELETE FROM metric_totals WHERE labels ->> 'pipeline' = NEW.name;
    RETURN NULL;
END $$;
CREATE TRIGGER pipelines_metrics_deleted AFTER UPDATE OF deleted_at ON pipelines
    FOR EACH ROW WHEN (OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL)
    EXECUTE FUNCTION metrics_pipeline_deleted();
