-- 0021: the Portal's own accounts (issue 23), separate from the apps' end users: operators and
-- developers, their roles per app, their browser sessions, invites, sign-in tickets and lockouts.
-- Portal e-mails (invites) go through the outbox like every other e-mail, but belong to no app.

CREATE TABLE portal_accounts (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- Always stored lower-cased, so the unique index is on the value itself.
    email              text NOT NULL UNIQUE CHECK (length(email) BETWEEN 3 AND 254 AND email = lower(email)),
    password_hash      text,                              -- bcrypt (PasswordHasher); NULL until an invite is accepted
    totp_secret_sealed bytea,                             -- SecretBox, purpose portal-totp:<id>
    totp_enabled       boolean NOT NULL DEFAULT false,    -- false: enrolment not confirmed, no sign-in yet
    totp_last_step     bigint NOT NULL DEFAULT 0,         -- the last accepted TOTP step: a code works once
    is_operator        boolean NOT NULL DEFAULT false,
    status             text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

-- A developer's role on one app. Deleting the app (or the account) removes the role.
CREATE TABLE portal_roles (
    account_id uuid NOT NULL REFERENCES portal_accounts (id) ON DELETE CASCADE,
    app_ref    bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('owner', 'editor', 'viewer')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, app_ref)
);
CREATE INDEX portal_roles_app ON portal_roles (app_ref);

-- Browser sessions. The cookie holds a random 256-bit secret; only its SHA-256 is stored. A session
-- ends 30 minutes after it was last seen and 12 hours after it began (PortalAccounts enforces both in
-- the lookup). proven_at is when the account last proved itself (sign-in or fresh sign-in).
CREATE TABLE portal_sessions (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id   uuid NOT NULL REFERENCES portal_accounts (id) ON DELETE CASCADE,
    secret_hash  bytea NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    proven_at    timestamptz NOT NULL DEFAULT now(),
    proven_by    text NOT NULL
);
CREATE INDEX portal_sessions_account ON portal_sessions (account_id);

-- Invites: a one-time code (only its SHA-256 stored) for one e-mail address, either for an operator
-- account or for a role on one app. Single use (used_at is set by the statement that accepts it),
-- valid 7 days. `resets` (made by the portal-operator command, by someone with the database) lets an
-- existing account set a new password and enrol a new second factor.
CREATE TABLE portal_invites (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    code_hash   bytea NOT NULL UNIQUE,
    email       text NOT NULL CHECK (length(email) BETWEEN 3 AND 254 AND email = lower(email)),
    is_operator boolean NOT NULL DEFAULT false,
    app_ref     bigint REFERENCES apps (id) ON DELETE CASCADE,
    role        text CHECK (role IN ('owner', 'editor', 'viewer')),
    resets      boolean NOT NULL DEFAULT false,
    invited_by  uuid REFERENCES portal_accounts (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    CHECK ((is_operator AND app_ref IS NULL AND role IS NULL) OR (NOT is_operator AND role IS NOT NULL))
);
CREATE INDEX portal_invites_email ON portal_invites (email);

-- Short-lived tickets between two steps of one ceremony, only their SHA-256 stored: 'sign-in' (the
-- password was right; the TOTP code comes next, 5 minutes) and 'enrol' (an accepted invite; the first
-- TOTP code confirms the new secret, 30 minutes). Each allows a few code attempts, counted before
-- the check, and is used up by the step that succeeds.
CREATE TABLE portal_tickets (
    secret_hash bytea PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('sign-in', 'enrol')),
    account_id  uuid NOT NULL REFERENCES portal_accounts (id) ON DELETE CASCADE,
    attempts    integer NOT NULL DEFAULT 0,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
CREATE INDEX portal_tickets_account ON portal_tickets (account_id);

-- The Portal's lockout counters, with exactly login_throttle's columns so that ThrottleStore runs the
-- same statements on either table. login_throttle's app_ref references an app (its counters go with
-- the app); the Portal's counters belong to no app, so here app_ref is always 0.
CREATE TABLE portal_throttle (
    app_ref      bigint NOT NULL DEFAULT 0 CHECK (app_ref = 0),
    subject      text NOT NULL,
    failures     integer NOT NULL DEFAULT 0,
    locked_until timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_ref, subject)
);

-- Portal e-mails belong to no app.
ALTER TABLE messages ALTER COLUMN app_ref DROP NOT NULL;
