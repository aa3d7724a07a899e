-- Tokens with a lifetime, a last use and a revocation; failed authentications remembered per
-- client address; pipelines deleted softly so their history stays readable.

-- A principal is one token (its id is the token's id). A revoked one keeps its row (the
-- list shows it, its hash is never accepted again); only live tokens hold a name, so a name
-- is reusable once its token is revoked.
ALTER TABLE principals
    ADD COLUMN expires_at   timestamptz,   -- null: never expires
    ADD COLUMN last_used_at timestamptz,   -- written at most once a minute per token
    ADD COLUMN revoked_at   timestamptz;
ALTER TABLE principals DROP CONSTRAINT principals_name_key;
CREATE UNIQUE INDEX principals_live_name ON principals (name) WHERE revoked_at IS NULL;

-- The secrets a token had before it was rotated (or `etl seed` replaced it): never accepted
-- again, and `etl seed` refuses to bring one back.
CREATE TABLE retired_tokens (
    token_hash   text PRIMARY KEY,              -- sha256 hex of the retired secret
    principal_id uuid NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    retired_at   timestamptz NOT NULL DEFAULT now()
);

-- A console session belongs to the secret that signed in: a rotation, a revocation or an
-- expiry of that token ends it on the next request. Open sessions keep working.
ALTER TABLE console_sessions ADD COLUMN api_token_hash text;
UPDATE console_sessions s SET api_token_hash = p.token_hash
FROM principals p WHERE p.id = s.principal_id;
ALTER TABLE console_sessions ALTER COLUMN api_token_hash SET NOT NULL;

-- Failed bearer tokens and sign-ins per client address: the consecutive count decides the
-- delay of the next failed answer (reset by a success or after 15 quiet minutes); the audit
-- gets at most one row per address and minute, carrying the failures since the last one.
CREATE TABLE auth_failures (
    client_addr    text PRIMARY KEY,
    failures       integer NOT NULL CHECK (failures >= 1),   -- consecutive
    last_failed_at timestamptz NOT NULL,
    unaudited      integer NOT NULL CHECK (unaudited >= 0),  -- failures not yet in the audit
    audited_at     timestamptz                               -- the newest audit row's time
);
CREATE INDEX auth_failures_quiet ON auth_failures (last_failed_at);

-- A deleted pipeline keeps its row, revisions and runs (GET /runs/{id} still answers); it is
-- gone from every pipeline read, its schedules are deleted with it, and its name is free.
ALTER TABLE pipelines ADD COLUMN deleted_at timestamptz;
ALTER TABLE pipelines DROP CONSTRAINT pipelines_name_key;
CREATE UNIQUE INDEX pipelines_live_name ON pipelines (name) WHERE deleted_at IS NULL;
