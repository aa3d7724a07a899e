-- The dramatiq-pg broker's schema (dramatiq_pg.schema.generate_init_sql("dramatiq", ""),
-- dramatiq-pg 0.12.0), kept here so `etl migrate` creates everything in one go.
CREATE SCHEMA IF NOT EXISTS "dramatiq";

CREATE TYPE "dramatiq"."state" AS ENUM ('queued', 'consumed', 'rejected', 'done');

CREATE TABLE "dramatiq"."queue" (
    message_id uuid PRIMARY KEY,
    queue_name text NOT NULL DEFAULT 'default',
    "state"    "dramatiq"."state",
    mtime      timestamp with time zone DEFAULT (now() AT TIME ZONE 'UTC'),
    message    jsonb,
    "result"   jsonb,
    result_ttl timestamp with time zone
);

CREATE INDEX ON "dramatiq"."queue" ("state", mtime);
