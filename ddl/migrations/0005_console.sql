-- Web console sessions (service/console): a sign-in with a token gives the browser a random
-- session id in an HttpOnly cookie; only its sha256 hex is stored, with an expiry on the
-- database clock. Sign-out revokes the row; a principal's later role change applies at once
-- because every request joins `principals`.
CREATE TABLE console_sessions (
    id           uuid PRIMARY KEY,
    token_hash   text NOT NULL UNIQUE,          -- sha256 hex of the cookie value
    principal_id uuid NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at) WHERE revoked_at IS NULL;

-- The global runs listing (newest first, keyset on (created_at, id)).
CREATE INDEX runs_newest ON runs (created_at DESC, id DESC);
