-- Metrics of the platform's own processes for GET /metrics (docs/metrics.md): the
-- coordinator and each executor write their `process_*` values (prometheus_client's
-- process collector) here every heartbeat interval (service/run/process_samples.py), and each
-- API worker adds its requests' durations to `api_request_totals` about once a second
-- (service/api/request_metrics.py). A scrape reads both, so whichever worker answers, it
-- reports every process. A cleanly stopped process deletes its row; a killed one's row is
-- left out of the scrape once it is `stale_after_s` old.
CREATE TABLE process_samples (
    process            text PRIMARY KEY,
    role               text NOT NULL,
    reported_at        timestamptz NOT NULL DEFAULT now(),
    stale_after_s      float8 NOT NULL,
    cpu_seconds        float8,
    resident_bytes     float8,
    virtual_bytes      float8,
    start_time_seconds float8,
    open_fds           float8,
    max_fds            float8
);

-- One row per (method, route template, status): the requests in each duration bucket (not
-- cumulative; the last element counts those above every bound), their count and sum. The
-- workers' additions are single upserts, at most one per worker and series a second.
CREATE TABLE api_request_totals (
    method    text NOT NULL,
    route     text NOT NULL,
    status    text NOT NULL,
    buckets   float8[] NOT NULL,
    count     float8 NOT NULL,
    sum_s     float8 NOT NULL,
    PRIMARY KEY (method, route, status)
);
