-- Run once by the postgres image on an empty data volume (/docker-entrypoint-initdb.d, psql).
-- Creates the `etl` database and the sandbox schemas. `etl migrate` (run by the coordinator
-- before it starts) creates them as well if missing and applies every migration, so this is a
-- convenience for a fresh volume, not the source of truth.
SELECT 'CREATE DATABASE etl'
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'etl')\gexec

\connect etl
CREATE SCHEMA IF NOT EXISTS sandbox;
CREATE SCHEMA IF NOT EXISTS etl_stage;
