-- 0013: sessions bound to the identity that opened them; e-mail links spent once; AppKey signups that a
-- third party cannot cancel.
--
-- A session records the identity (for a passkey, the passkey's identity, so the credential) that
-- opened it. Removing or detaching that identity ends exactly those sessions: the code deletes them
-- first, with their `session.revoked` events, and the foreign key's cascade guarantees that no session
-- outlives its identity whatever path deletes one. NULL: opened before this migration and not
-- attributable (see the backfill below); such a session ends with any identity of its method's kind.
ALTER TABLE sessions ADD COLUMN identity_id uuid REFERENCES identities (id) ON DELETE CASCADE;
CREATE INDEX sessions_identity ON sessions (identity_id) WHERE identity_id IS NOT NULL;

-- The existing sessions: every kind but passkey has at most one identity per user
-- (identities_user_kind), so the method names it. A passkey session is bound only when its user has
-- exactly one passkey.
UPDATE sessions s SET identity_id = i.id
FROM identities i
WHERE i.user_id = s.user_id AND i.kind = CASE s.method
        WHEN 'password' THEN 'password' WHEN 'second_factor' THEN 'password' WHEN 'signup' THEN 'password'
        WHEN 'register' THEN 'password' WHEN 'anonymous' THEN 'anonymous' WHEN 'apple' THEN 'apple'
        WHEN 'google' THEN 'google' END;
UPDATE sessions s SET identity_id = (SELECT i.id FROM identities i WHERE i.user_id = s.user_id AND i.kind = 'passkey')
WHERE s.method = 'passkey'
  AND (SELECT count(*) FROM identities i WHERE i.user_id = s.user_id AND i.kind = 'passkey') = 1;

-- The one exception to "a provider account links only by an explicit step": an imported CosyncJWT
-- account created with Apple or Google whose provider subject was not exported may link by the
-- provider's verified e-mail, once. This flag is set when that link is made and when the admin links or
-- detaches a provider identity of the user (a re-import keeps it): from then on only a recorded
-- subject signs in, and a detach is never undone by a login.
ALTER TABLE users ADD COLUMN social_email_link_spent boolean NOT NULL DEFAULT false;
UPDATE users u SET social_email_link_spent = true
WHERE EXISTS (SELECT 1 FROM identities i WHERE i.user_id = u.id AND i.kind IN ('apple', 'google'));

-- AppKey signups: several may be pending for one handle (each has its own signup-token), so a
-- stranger who starts a signup for someone else's address no longer replaces (cancels) theirs.
DROP INDEX appkey_signups_app_handle;
CREATE INDEX appkey_signups_app_handle ON appkey_signups (app_ref, lower(handle));

-- An anonymous handle is its account's whole credential: events and the audit log now record
-- `anonymous` in its place (Identifiers.redacted), and so do the rows written before. (A webhook
-- message re-sent after this carries the redacted body; its signature is made at sending time.)
UPDATE events SET body = (
    SELECT jsonb_set(b, '{data}', (
        SELECT jsonb_object_agg(k, CASE WHEN k ILIKE '%handle' AND jsonb_typeof(v) = 'string' AND v #>> '{}' LIKE '%ANON\_%'
                                        THEN '"anonymous"'::jsonb ELSE v END)
        FROM jsonb_each(b -> 'data') AS d(k, v)))::text
    FROM (SELECT body::jsonb AS b) AS parsed)
WHERE body LIKE '%ANON\_%' AND jsonb_typeof(body::jsonb -> 'data') = 'object' AND body::jsonb -> 'data' <> '{}'::jsonb;
UPDATE audit_log SET detail = (
    SELECT jsonb_object_agg(k, CASE WHEN k ILIKE '%handle' AND jsonb_typeof(v) = 'string' AND v #>> '{}' LIKE '%ANON\_%'
                                    THEN '"anonymous"'::jsonb ELSE v END)
    FROM jsonb_each(detail) AS d(k, v))
WHERE detail::text LIKE '%ANON\_%' AND jsonb_typeof(detail) = 'object' AND detail <> '{}'::jsonb;
