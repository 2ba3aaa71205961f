-- 0008: sessions.
--
-- Sessions: every login-type answer (login, loginComplete, loginAnonymous, signup without a code,
-- completeSignup, register (an accepted invite), social login/signup) opens a row here, and the access token names it (`sid`).
-- A token is alive while its session row exists and has not expired; ending a session is deleting
-- its row. Tokens issued before this migration (no `sid`) and imported CosyncJWT tokens are still
-- judged by users.token_version; `kept_token_hash` is the SHA-256 of the one such token that a
-- changePassword kept alive (the caller's own) while the version moved on.
CREATE TABLE sessions (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_ref        bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    method         text NOT NULL CHECK (method IN ('password', 'second_factor', 'anonymous', 'signup', 'register',
                                                   'apple', 'google')),
    client_address text,
    user_agent     text CHECK (length(user_agent) <= 512),
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_seen_at   timestamptz NOT NULL DEFAULT now(),  -- coarse: written at most every 5 minutes
    expires_at     timestamptz NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id, created_at);
CREATE INDEX sessions_expiry ON sessions (expires_at);

ALTER TABLE users ADD COLUMN kept_token_hash bytea;
