-- 0001: tenants (apps), their keys and tokens, users, and the per-app records the admin API lists.
-- Every table below "apps" hangs off apps(id) with ON DELETE CASCADE, so deleting an app removes
-- everything it owns in the one statement (and so in one transaction).

-- Deployment-wide values: the operator token hash when the server generated one itself.
CREATE TABLE server_settings (
    key        text PRIMARY KEY,
    value      text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Deployment-wide RSA keys that sign app tokens (legacy shape {appId, scope:"app"}) and, later,
-- access and login tokens. Private keys are sealed with AES-GCM under COSYNC_MASTER_KEY.
CREATE TABLE server_keys (
    kid                text PRIMARY KEY,
    public_key_pem     text NOT NULL,
    private_key_sealed bytea NOT NULL,
    active             boolean NOT NULL DEFAULT true,
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX server_keys_one_active ON server_keys (active) WHERE active;

CREATE TABLE apps (
    id                 bigserial PRIMARY KEY,            -- internal; newest-first keyset pagination
    app_id             text NOT NULL UNIQUE CHECK (app_id ~ '^[0-9a-f]{32}$'),
    name               text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    status             text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended', 'migrated')),
    settings           jsonb NOT NULL,                   -- every non-secret setting (AppSettings)
    app_secret_hash    bytea NOT NULL,                   -- SHA-256 of the app secret; the secret is never stored
    credentials_sealed bytea,                            -- AES-GCM(JSON of provider credentials), write-only
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX apps_lower_name ON apps (lower(name) text_pattern_ops);
CREATE UNIQUE INDEX apps_secret_hash ON apps (app_secret_hash);

-- App tokens are looked up by exact string: we store SHA-256(token) for the lookup (no timing oracle
-- on the string itself) and the token sealed, so the admin API can show it again. Imported legacy
-- tokens are stored the same way, which makes them match byte for byte.
CREATE TABLE app_tokens (
    token_hash   bytea PRIMARY KEY,
    app_ref      bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    token_sealed bytea NOT NULL,
    origin       text NOT NULL DEFAULT 'issued' CHECK (origin IN ('issued', 'imported')),
    expires_at   timestamptz,                            -- NULL: current token; set: old token in its grace period
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX app_tokens_one_current ON app_tokens (app_ref) WHERE expires_at IS NULL;

-- Per-app RSA-2048 key pairs signing user JWTs. One active signing key; rotated-out keys stay in the
-- JWKS until retires_at (JWTs they signed have expired by then).
CREATE TABLE app_keys (
    kid                text PRIMARY KEY,
    app_ref            bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    public_key_pem     text NOT NULL,                    -- SPKI PEM, legacy layout (64-char lines, no trailing newline)
    private_key_sealed bytea NOT NULL,                   -- AES-GCM(PKCS#1 PEM)
    active             boolean NOT NULL,
    retires_at         timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX app_keys_one_active ON app_keys (app_ref) WHERE active;
CREATE INDEX app_keys_app ON app_keys (app_ref);

CREATE TABLE users (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_ref              bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    handle               text NOT NULL CHECK (length(handle) BETWEEN 1 AND 254),
    user_name            text CHECK (user_name IS NULL OR length(user_name) BETWEEN 1 AND 64),
    password_hash        text,                            -- bcrypt(md5 hex); NULL for social/anonymous users
    locale               text NOT NULL DEFAULT 'EN',
    status               text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    login_provider       text NOT NULL DEFAULT '',
    social_user_id       text,
    metadata             jsonb NOT NULL DEFAULT '{}'::jsonb,
    phone                text,
    phone_verified       boolean NOT NULL DEFAULT false,
    two_factor_phone     boolean NOT NULL DEFAULT false,
    two_factor_google    boolean NOT NULL DEFAULT false,
    totp_secret_sealed   bytea,
    token_version        integer NOT NULL DEFAULT 0,      -- bumped to revoke every access token of the user
    last_login           timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_app_handle ON users (app_ref, lower(handle));
CREATE UNIQUE INDEX users_app_user_name ON users (app_ref, lower(user_name)) WHERE user_name IS NOT NULL;
CREATE INDEX users_app_lower_handle_pattern ON users (app_ref, lower(handle) text_pattern_ops);
CREATE INDEX users_app_lower_user_name_pattern ON users (app_ref, lower(user_name) text_pattern_ops);

CREATE TABLE signups (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_ref       bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    handle        text NOT NULL,
    password_hash text,
    code_sealed   bytea,
    code_attempts integer NOT NULL DEFAULT 0,
    metadata      jsonb NOT NULL DEFAULT '{}'::jsonb,
    locale        text NOT NULL DEFAULT 'EN',
    status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'verified')),
    expires_at    timestamptz NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX signups_app_handle_pending ON signups (app_ref, lower(handle)) WHERE status = 'pending';
CREATE INDEX signups_app_created ON signups (app_ref, created_at DESC, id DESC);

CREATE TABLE invites (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_ref        bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    handle         text NOT NULL,
    sender_handle  text NOT NULL,
    sender_user_id text NOT NULL,
    code_sealed    bytea,
    code_attempts  integer NOT NULL DEFAULT 0,
    metadata       jsonb NOT NULL DEFAULT '{}'::jsonb,
    locale         text NOT NULL DEFAULT 'EN',
    status         text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'verified')),
    expires_at     timestamptz NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX invites_app_handle_pending ON invites (app_ref, lower(handle)) WHERE status = 'pending';
CREATE INDEX invites_app_created ON invites (app_ref, created_at DESC, id DESC);

CREATE TABLE email_templates (
    app_ref          bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    template         text NOT NULL,
    locale           text NOT NULL,
    subject          text NOT NULL,
    html             text NOT NULL,
    text             text NOT NULL DEFAULT '',
    reply_to         text NOT NULL DEFAULT '',
    locale_link_text text NOT NULL DEFAULT '',
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_ref, template, locale)
);

-- The outbox: every email/SMS is written here in the same transaction as the state change it belongs
-- to; delivery workers claim rows with FOR UPDATE SKIP LOCKED.
CREATE TABLE messages (
    id           bigserial PRIMARY KEY,
    app_ref      bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    channel      text NOT NULL CHECK (channel IN ('email', 'sms')),
    recipient    text NOT NULL,
    template     text NOT NULL,
    subject      text NOT NULL DEFAULT '',
    body         text NOT NULL,
    status       text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'sent', 'failed')),
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text,
    next_attempt timestamptz NOT NULL DEFAULT now(),
    created_at   timestamptz NOT NULL DEFAULT now(),
    sent_at      timestamptz
);
CREATE INDEX messages_app_created ON messages (app_ref, id DESC);
CREATE INDEX messages_due ON messages (next_attempt) WHERE status = 'queued';

-- Audit log of admin and end-user actions. app_ref is NULL for server-level events (an app deletion
-- is logged there, since the app's own log goes with it).
CREATE TABLE audit_log (
    id         bigserial PRIMARY KEY,
    app_ref    bigint REFERENCES apps (id) ON DELETE CASCADE,
    app_id     text NOT NULL DEFAULT '',
    actor      text NOT NULL,
    action     text NOT NULL,
    status     text NOT NULL DEFAULT 'success' CHECK (status IN ('success', 'error')),
    detail     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_app ON audit_log (app_ref, id DESC);
