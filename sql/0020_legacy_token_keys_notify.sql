-- 0020: tell every node when the imported legacy server keys change (legacy_token_keys), so that a
-- running node accepts the legacy access tokens of a fresh import at once, instead of after its
-- once-a-minute reload (TokenIssuer.verifyLegacyAccessToken).
--
-- The notification goes on the app cache's channel (cosync_apps), which every node already listens to,
-- with the payload 'legacy-token-keys'. A node that does not know this payload treats it as it treats any
-- payload that is not an app id: it empties its whole app cache, which is safe.
CREATE FUNCTION notify_legacy_token_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cosync_apps', 'legacy-token-keys');
    RETURN NULL;
END;
$$;

CREATE TRIGGER legacy_token_keys_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON legacy_token_keys
    FOR EACH STATEMENT EXECUTE FUNCTION notify_legacy_token_keys_changed();
