-- 0012: tell every node when an app changes, so that its in-memory app cache (AppCache.swift) drops it.
--
-- Any change to an app row, its app tokens or its signing keys sends NOTIFY cosync_apps with the app's
-- internal id as the payload. PostgreSQL delivers notifications when the transaction commits (none for
-- a rollback) and folds identical ones of one transaction into one. The triggers catch every writer:
-- the admin API, the CLI, the legacy importer and hand-written SQL alike.

CREATE FUNCTION notify_app_row_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM pg_notify('cosync_apps', OLD.id::text);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM pg_notify('cosync_apps', NEW.id::text);
    END IF;
    RETURN NULL;
END;
$$;

-- For the tables that belong to an app through app_ref.
CREATE FUNCTION notify_app_part_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM pg_notify('cosync_apps', OLD.app_ref::text);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM pg_notify('cosync_apps', NEW.app_ref::text);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER apps_changed AFTER INSERT OR UPDATE OR DELETE ON apps
    FOR EACH ROW EXECUTE FUNCTION notify_app_row_changed();
CREATE TRIGGER app_tokens_changed AFTER INSERT OR UPDATE OR DELETE ON app_tokens
    FOR EACH ROW EXECUTE FUNCTION notify_app_part_changed();
CREATE TRIGGER app_keys_changed AFTER INSERT OR UPDATE OR DELETE ON app_keys
    FOR EACH ROW EXECUTE FUNCTION notify_app_part_changed();
