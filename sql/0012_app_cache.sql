-- 0012: tell every node when an app changes, so that its in-memory app cache (AppCache.swift) drops it.
--
-- Any change to an app row, its app tokens or its signing keys sends NOTIFY cosync_apps with the app's
-- internal id as the payload. PostgreSQL delivers notifications when the transaction commits (none for
-- a rollback) and folds identical ones of one transaction into one. The triggers catch every writer:
-- the admin API, the CLI, the legacy importer and hand-written SQL alike.
--
-- One function for the three tables: its argument names the column that holds the app's id (`id` in
-- apps, `app_ref` in the others). It reads the column through to_jsonb, since PL/pgSQL cannot name a
-- record field that only some of the tables have.
CREATE FUNCTION notify_app_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM pg_notify('cosync_apps', to_jsonb(OLD) ->> TG_ARGV[0]);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM pg_notify('cosync_apps', to_jsonb(NEW) ->> TG_ARGV[0]);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER apps_changed AFTER INSERT OR UPDATE OR DELETE ON apps
    FOR EACH ROW EXECUTE FUNCTION notify_app_changed('id');
CREATE TRIGGER app_tokens_changed AFTER INSERT OR UPDATE OR DELETE ON app_tokens
    FOR EACH ROW EXECUTE FUNCTION notify_app_changed('app_ref');
CREATE TRIGGER app_keys_changed AFTER INSERT OR UPDATE OR DELETE ON app_keys
    FOR EACH ROW EXECUTE FUNCTION notify_app_changed('app_ref');
