-- 0024: passkeys of Portal accounts (issue 23). A Portal account signs in with its password and a
-- TOTP code, or with a passkey (WebAuthn, checked by the same verifier as the apps' passkeys, against
-- the Portal's own relying party: COSYNC_PORTAL_RP_ID and COSYNC_PORTAL_ORIGIN).

CREATE TABLE portal_passkeys (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id      uuid NOT NULL REFERENCES portal_accounts (id) ON DELETE CASCADE,
    -- The raw credential id (WebAuthn caps it at 1023 bytes); one account only.
    credential_id   bytea NOT NULL UNIQUE CHECK (length(credential_id) BETWEEN 1 AND 1023),
    public_key      bytea NOT NULL,                        -- the COSE_Key as the authenticator sent it
    sign_count      bigint NOT NULL DEFAULT 0 CHECK (sign_count >= 0),
    backup_eligible boolean NOT NULL DEFAULT false,
    name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_used_at    timestamptz
);
CREATE INDEX portal_passkeys_account ON portal_passkeys (account_id, created_at);

-- Challenges of the Portal's WebAuthn ceremonies: 32 random bytes (base64url), single use (taken by
-- one DELETE … RETURNING before the response is verified, so a replay finds nothing), a few minutes
-- long, bound to the ceremony (purpose) and to what asked for it (SHA-256 of the browser key, the
-- enrolment ticket or the session), and for every purpose but a sign-in to the account.
-- (webauthn_challenges is the apps' table: its rows belong to an app.)
CREATE TABLE portal_passkey_challenges (
    challenge  text PRIMARY KEY CHECK (length(challenge) = 43),
    purpose    text NOT NULL CHECK (purpose IN ('sign-in', 'enrol', 'add', 'reauth')),
    binding    bytea NOT NULL,
    account_id uuid REFERENCES portal_accounts (id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL
);
CREATE INDEX portal_passkey_challenges_binding ON portal_passkey_challenges (binding);
CREATE INDEX portal_passkey_challenges_expiry ON portal_passkey_challenges (expires_at);
