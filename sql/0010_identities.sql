-- 0010: identities (the ways a user signs in), moved out of users.
--
-- One row per way: the password (subject = the handle, lower-cased; the hash stays in
-- users.password_hash), an Apple or Google account (subject = the provider's user id), the anonymous
-- handle (subject = the ANON_ handle, matched exactly), and room for passkeys (subject = the credential
-- id, base64url; the WebAuthn columns come with the passkey API). Sign-in reads this table.
-- users.login_provider stays: it is the wire's `loginProvider` (how the account was created), not a
-- way to sign in. users.social_user_id stays only as the imported CosyncJWT value that a re-import
-- compares with; nothing signs in through it.
CREATE TABLE identities (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_ref      bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind         text NOT NULL CHECK (kind IN ('password', 'apple', 'google', 'anonymous', 'passkey')),
    subject      text NOT NULL CHECK (length(subject) BETWEEN 1 AND 1024),
    email        text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz
);
CREATE UNIQUE INDEX identities_app_subject ON identities (app_ref, kind, subject);
CREATE INDEX identities_user ON identities (user_id);

-- The existing accounts: a social account gets its provider identity, an anonymous one its anonymous
-- identity, and every account with a password hash its password identity. "Anonymous" is decided by
-- provenance: only loginAnonymous (and the import of such accounts) stores a handle with an upper-case
-- `ANON_` (every other way lower-cases handles), on an account of no provider. Such an account keeps
-- its anonymous identity even after a reset gave it a password (the device still calls loginAnonymous).
INSERT INTO identities (app_ref, user_id, kind, subject, created_at)
SELECT app_ref, id, login_provider, social_user_id, created_at FROM users
WHERE login_provider IN ('apple', 'google') AND social_user_id IS NOT NULL;

INSERT INTO identities (app_ref, user_id, kind, subject, created_at)
SELECT app_ref, id, 'anonymous', handle, created_at FROM users
WHERE login_provider = '' AND social_user_id IS NULL AND handle LIKE '%ANON\_%'
ON CONFLICT DO NOTHING;

INSERT INTO identities (app_ref, user_id, kind, subject, created_at)
SELECT app_ref, id, 'password', lower(handle), created_at FROM users
WHERE password_hash IS NOT NULL
ON CONFLICT DO NOTHING;

-- At most one identity of each kind per user, passkeys aside (a user may hold several passkeys).
CREATE UNIQUE INDEX identities_user_kind ON identities (user_id, kind) WHERE kind <> 'passkey';
DROP INDEX users_app_social_account;
