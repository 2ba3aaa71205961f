-- 0002: what the end-user API needs beyond 0001: password-reset codes, login throttling shared by all
-- nodes, and the parts of an outbox message a transport needs.

-- Password-reset codes (sealed, so a database reader cannot use them), keyed by the identifier the
-- user typed (handle or user name, lower-cased). Several may be pending; each expires and allows a
-- few wrong tries.
CREATE TABLE reset_codes (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_ref     bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    identifier  text NOT NULL,
    code_sealed bytea NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    expires_at  timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reset_codes_lookup ON reset_codes (app_ref, identifier);

-- Failed-login counters per (app, handle) and per (app, client address), in PostgreSQL so that every
-- node sees the same numbers.
CREATE TABLE login_throttle (
    app_ref      bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    subject      text NOT NULL,                     -- 'handle:<handle>' or 'ip:<address>'
    failures     integer NOT NULL DEFAULT 0,
    locked_until timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_ref, subject)
);

ALTER TABLE messages
    ADD COLUMN html_body   text NOT NULL DEFAULT '',
    ADD COLUMN sender      text NOT NULL DEFAULT '',
    ADD COLUMN sender_name text NOT NULL DEFAULT '',
    ADD COLUMN reply_to    text NOT NULL DEFAULT '';

-- Pending SMS login codes and phone-verification codes live on the user (one each at a time).
ALTER TABLE users
    ADD COLUMN login_code_sealed  bytea,
    ADD COLUMN login_code_expires timestamptz,
    ADD COLUMN login_code_attempts integer NOT NULL DEFAULT 0;
