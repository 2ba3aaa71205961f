-- 0011: AppKey, the passkey product (spec appkey-api.md §6).
--
-- Every app serves one product: 'cosyncAuth' (the password API, every app made before this) or
-- 'appKey' (the passkey API). The end-user routes whose names both APIs share dispatch on it. It is
-- chosen when the app is created and never changes.
--
-- The relying-party settings of an app (RP ID and name, allowed origins, user-verification and
-- attestation policy, trust anchors, passkeys per user, challenge lifetime, counter-regression
-- policy) live in apps.settings, the app's jsonb settings document, with defaults for a document
-- that lacks them (AppSettings), as every other app setting does.
ALTER TABLE apps ADD COLUMN product text NOT NULL DEFAULT 'cosyncAuth' CHECK (product IN ('cosyncAuth', 'appKey'));

-- A passkey login opens a session of its own kind.
ALTER TABLE sessions DROP CONSTRAINT sessions_method_check;
ALTER TABLE sessions ADD CONSTRAINT sessions_method_check
    CHECK (method IN ('password', 'second_factor', 'anonymous', 'signup', 'register', 'apple', 'google', 'passkey'));

-- A passkey's identity subject is its credential id in base64url: up to 1023 bytes, 1364 characters.
ALTER TABLE identities DROP CONSTRAINT identities_subject_check;
ALTER TABLE identities ADD CONSTRAINT identities_subject_check CHECK (length(subject) BETWEEN 1 AND 1400);

-- What an AppKey user has beyond a CosyncAuth user: the names shown in the passkey sheet, whether it
-- is an anonymous (ANON_) account, and whether a passkey reset waits for a new passkey.
CREATE TABLE appkey_profiles (
    user_id             uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    app_ref             bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    display_name        text NOT NULL DEFAULT '' CHECK (length(display_name) <= 256),
    first_name          text CHECK (length(first_name) <= 128),
    last_name           text CHECK (length(last_name) <= 128),
    is_anonymous        boolean NOT NULL DEFAULT false,
    require_add_passkey boolean NOT NULL DEFAULT false
);

-- One WebAuthn credential. Each is also an identity of its user (identities.kind = 'passkey',
-- subject = base64url of the credential id), so "the user's last way to sign in" counts passkeys and
-- social identities alike, and deleting the identity deletes the passkey.
CREATE TABLE passkeys (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    identity_id          uuid NOT NULL UNIQUE REFERENCES identities (id) ON DELETE CASCADE,
    app_ref              bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    user_id              uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    credential_id        bytea NOT NULL CHECK (length(credential_id) BETWEEN 1 AND 1023),
    public_key_cose      bytea NOT NULL CHECK (length(public_key_cose) <= 2048),
    algorithm            integer NOT NULL,
    sign_count           bigint NOT NULL DEFAULT 0 CHECK (sign_count BETWEEN 0 AND 4294967295),
    aaguid               bytea NOT NULL,
    format               text NOT NULL,
    attestation_verified boolean NOT NULL DEFAULT false,
    transports           text[] NOT NULL DEFAULT '{}',
    backup_eligible      boolean NOT NULL,
    backup_state         boolean NOT NULL,
    uv_initialized       boolean NOT NULL,
    clone_suspected      boolean NOT NULL DEFAULT false,
    name                 text NOT NULL CHECK (length(name) BETWEEN 1 AND 256),
    platform             text NOT NULL DEFAULT 'unknown',
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    last_used_at         timestamptz
);
CREATE UNIQUE INDEX passkeys_app_credential ON passkeys (app_ref, credential_id);
CREATE INDEX passkeys_user ON passkeys (user_id, created_at);

-- WebAuthn challenges: 32 random bytes (base64url), single use, bound to the app, the ceremony
-- (purpose) and the handle or user; any node completes a ceremony another began. Consumed by one
-- DELETE … RETURNING before the response is verified, so a replay finds nothing.
CREATE TABLE webauthn_challenges (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_ref          bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    challenge        text NOT NULL CHECK (length(challenge) = 43),
    purpose          text NOT NULL CHECK (purpose IN ('signup', 'anonymous', 'addPasskey', 'login', 'verify')),
    handle           text NOT NULL,
    user_id          uuid,          -- the user (login, verify, addPasskey) or the pre-allocated id (signup, anonymous)
    session_id       uuid,          -- addPasskey: the session that asked
    display_name     text,
    first_name       text,
    last_name        text,
    locale           text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL
);
CREATE UNIQUE INDEX webauthn_challenges_value ON webauthn_challenges (app_ref, challenge);
CREATE INDEX webauthn_challenges_expiry ON webauthn_challenges (expires_at);

-- An AppKey signup between signupConfirm (passkey verified, code sent) and signupComplete (code
-- given): one per (app, handle); a new confirm replaces it. The signup-token is kept as its SHA-256.
CREATE TABLE appkey_signups (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_ref              bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    handle               text NOT NULL,
    user_id              uuid NOT NULL,
    display_name         text NOT NULL DEFAULT '',
    first_name           text,
    last_name            text,
    locale               text NOT NULL DEFAULT 'EN',
    credential_id        bytea NOT NULL CHECK (length(credential_id) BETWEEN 1 AND 1023),
    public_key_cose      bytea NOT NULL CHECK (length(public_key_cose) <= 2048),
    algorithm            integer NOT NULL,
    sign_count           bigint NOT NULL,
    aaguid               bytea NOT NULL,
    format               text NOT NULL,
    attestation_verified boolean NOT NULL,
    transports           text[] NOT NULL DEFAULT '{}',
    backup_eligible      boolean NOT NULL,
    backup_state         boolean NOT NULL,
    uv_initialized       boolean NOT NULL,
    platform             text NOT NULL DEFAULT 'unknown',
    code_sealed          bytea NOT NULL,
    attempts             integer NOT NULL DEFAULT 0,
    token_hash           bytea NOT NULL UNIQUE,
    created_at           timestamptz NOT NULL DEFAULT now(),
    expires_at           timestamptz NOT NULL
);
CREATE UNIQUE INDEX appkey_signups_app_handle ON appkey_signups (app_ref, lower(handle));
CREATE INDEX appkey_signups_expiry ON appkey_signups (expires_at);

-- A passkey reset (account recovery, spec §5.4): the admin removed the user's passkeys and e-mailed a
-- reset token (a JWT of scope resetPasskey whose jti is this row's id); the token may add one passkey,
-- once, before it expires.
CREATE TABLE passkey_resets (
    id         uuid PRIMARY KEY,
    app_ref    bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
CREATE INDEX passkey_resets_user ON passkey_resets (user_id);
