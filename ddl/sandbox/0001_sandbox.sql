-- The sandbox: `sandbox` holds the tables users ingest from and export to; `etl_stage`
-- holds per-step staging tables whose rows are not visible until the step commits.
CREATE SCHEMA IF NOT EXISTS sandbox;
CREATE SCHEMA IF NOT EXISTS etl_stage;
