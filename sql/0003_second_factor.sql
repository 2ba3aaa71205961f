-- 0003: the second factor (SMS and TOTP), phone verification, social accounts and the SMS cap.

-- One row per login-token (its `jti`): single use, a 10-minute life, at most a few wrong codes.
-- The SMS code of a phone challenge is sealed here, so each login-token has its own code.
CREATE TABLE login_challenges (
    id          uuid PRIMARY KEY,
    app_ref     bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    factor      text NOT NULL CHECK (factor IN ('phone', 'google')),
    code_sealed bytea,
    attempts    integer NOT NULL DEFAULT 0,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_challenges_user ON login_challenges (user_id);
CREATE INDEX login_challenges_expires ON login_challenges (expires_at);

-- The SMS login code moves from the user to its challenge; the phone-verification code gets an
-- expiry and an attempt count; the last accepted TOTP step is kept so that a code is never reused.
ALTER TABLE users
    DROP COLUMN login_code_sealed,
    DROP COLUMN login_code_expires,
    DROP COLUMN login_code_attempts,
    ADD COLUMN phone_code_sealed   bytea,
    ADD COLUMN phone_code_expires  timestamptz,
    ADD COLUMN phone_code_attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN totp_last_step      bigint NOT NULL DEFAULT 0;

-- A verified phone number belongs to one user of an app; a provider account to one user of an app.
CREATE UNIQUE INDEX users_app_verified_phone ON users (app_ref, phone) WHERE phone_verified AND phone IS NOT NULL;
CREATE UNIQUE INDEX users_app_social_account ON users (app_ref, login_provider, social_user_id) WHERE social_user_id IS NOT NULL;

-- SMS queued per app and UTC day, counted against the app's smsDailyLimit in the transaction that
-- queues the SMS.
CREATE TABLE sms_daily_usage (
    app_ref bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    day     date NOT NULL,
    queued  integer NOT NULL,
    PRIMARY KEY (app_ref, day)
);

-- Per-number SMS rate limit.
CREATE INDEX messages_sms_recipient ON messages (app_ref, recipient, created_at) WHERE channel = 'sms';

-- An e-mail may carry one attachment (the TOTP QR code PNG).
ALTER TABLE messages
    ADD COLUMN attachment_name text,
    ADD COLUMN attachment_data bytea;
