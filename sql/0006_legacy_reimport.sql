-- 0006: a re-import of a newer CosyncJWT export never undoes what happened on this server.
--
-- legacy_state: a digest of what the import last wrote into an imported app or user row. When the row's
-- current digest differs, the row was changed here (suspended, password changed, secret rotated, …) and
-- a re-import keeps it and reports it (unless --overwrite-local-changes).
--
-- legacy_import_tombstones: legacy rows a re-import must not bring back. A trigger writes one, in the
-- transaction of the delete, whenever an imported user, signup or invite is deleted here (end-user deleteAccount, admin
-- delete, anything else); the importer's own deletes (a newer duplicate replacing an older row) set
-- cosync.import_delete and leave none. The importer also writes one per legacy reset code it carried,
-- so a code used or expired here is never revived.

CREATE FUNCTION legacy_user_state(u users) RETURNS bytea LANGUAGE sql STABLE AS $$
    SELECT sha256(convert_to(jsonb_build_array(
        u.handle, u.user_name, u.password_hash, u.locale, u.status, u.login_provider, u.social_user_id, u.metadata, u.phone,
        u.phone_verified, u.two_factor_phone, u.two_factor_google, encode(u.totp_secret_sealed, 'base64'), u.jwt_subject)::text, 'UTF8'))
$$;

CREATE FUNCTION legacy_app_state(a apps) RETURNS bytea LANGUAGE sql STABLE AS $$
    SELECT sha256(convert_to(jsonb_build_array(
        a.name, a.status, a.settings, encode(a.app_secret_hash, 'base64'), encode(a.credentials_sealed, 'base64'))::text, 'UTF8'))
$$;

ALTER TABLE users ADD COLUMN legacy_state bytea;
ALTER TABLE apps ADD COLUMN legacy_state bytea;
-- Rows imported before this migration: their current state is taken as the imported one.
UPDATE users SET legacy_state = legacy_user_state(users) WHERE legacy_id IS NOT NULL;
UPDATE apps SET legacy_state = legacy_app_state(apps) WHERE legacy_fingerprint IS NOT NULL;

CREATE TABLE legacy_import_tombstones (
    app_ref    bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    collection text NOT NULL,                  -- users | signups | invites | resetpasswords
    legacy_id  text NOT NULL,
    reason     text NOT NULL,                  -- deleted | carried
    at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_ref, collection, legacy_id)
);

CREATE FUNCTION legacy_user_tombstone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Not for the importer's own replacements, and not when the whole app goes (its rows cascade).
    IF coalesce(current_setting('cosync.import_delete', true), '') <> 'on'
        AND EXISTS (SELECT 1 FROM apps WHERE id = OLD.app_ref) THEN
        INSERT INTO legacy_import_tombstones (app_ref, collection, legacy_id, reason)
        VALUES (OLD.app_ref, TG_TABLE_NAME, OLD.legacy_id, 'deleted')
        ON CONFLICT (app_ref, collection, legacy_id) DO UPDATE SET reason = 'deleted', at = now();
    END IF;
    RETURN OLD;
END
$$;

CREATE TRIGGER users_legacy_tombstone AFTER DELETE ON users
    FOR EACH ROW WHEN (OLD.legacy_id IS NOT NULL) EXECUTE FUNCTION legacy_user_tombstone();
-- An imported pending signup or invite deleted here (admin DELETE) stays deleted too.
CREATE TRIGGER signups_legacy_tombstone AFTER DELETE ON signups
    FOR EACH ROW WHEN (OLD.legacy_id IS NOT NULL) EXECUTE FUNCTION legacy_user_tombstone();
CREATE TRIGGER invites_legacy_tombstone AFTER DELETE ON invites
    FOR EACH ROW WHEN (OLD.legacy_id IS NOT NULL) EXECUTE FUNCTION legacy_user_tombstone();

-- Carried legacy reset codes: the legacy id, so a rerun finds the row it made.
ALTER TABLE reset_codes ADD COLUMN legacy_id text;
CREATE UNIQUE INDEX reset_codes_app_legacy_id ON reset_codes (app_ref, legacy_id) WHERE legacy_id IS NOT NULL;

-- legacy_state follows every import write (the only writer of legacy_fingerprint), and nothing else.
-- One trigger function for users and apps: plpgsql prepares it per table, so NEW has that table's type.
CREATE FUNCTION legacy_state_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.legacy_fingerprint IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.legacy_fingerprint IS DISTINCT FROM OLD.legacy_fingerprint) THEN
        IF TG_TABLE_NAME = 'users' THEN
            NEW.legacy_state := legacy_user_state(NEW);
        ELSE
            NEW.legacy_state := legacy_app_state(NEW);
        END IF;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER users_legacy_state BEFORE INSERT OR UPDATE ON users
    FOR EACH ROW EXECUTE FUNCTION legacy_state_stamp();
CREATE TRIGGER apps_legacy_state BEFORE INSERT OR UPDATE ON apps
    FOR EACH ROW EXECUTE FUNCTION legacy_state_stamp();
