-- A deleted pipeline's series leave the metrics with it (migration 0009 keeps them by
-- pipeline name): its kept totals and unfolded deltas go in the transaction that deletes
-- it, so churn of pipelines does not grow the scrape, and a new pipeline that takes the
-- name back starts its counters from zero (a counter reset, which Prometheus expects).
CREATE FUNCTION metrics_pipeline_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM metric_totals WHERE labels ->> 'pipeline' = NEW.name;
    DELETE FROM metric_deltas WHERE labels ->> 'pipeline' = NEW.name;
    RETURN NULL;
END $$;
CREATE TRIGGER pipelines_metrics_deleted AFTER UPDATE OF deleted_at ON pipelines
    FOR EACH ROW WHEN (OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL)
    EXECUTE FUNCTION metrics_pipeline_deleted();
