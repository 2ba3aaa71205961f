-- 0004: what the CosyncJWT import (cosyncauth import-legacy) needs: the legacy id and a fingerprint
-- of the source document on every imported row (a rerun changes only rows whose source changed, so
-- running the import twice gives an identical database), a marker on imported apps, checkpoints for
-- resuming, and the legacy server's public key for accepting old access tokens until a cut-off.

ALTER TABLE apps ADD COLUMN legacy_fingerprint bytea;   -- NULL: created on this server
ALTER TABLE users ADD COLUMN legacy_id text, ADD COLUMN legacy_fingerprint bytea;
ALTER TABLE signups ADD COLUMN legacy_id text, ADD COLUMN legacy_fingerprint bytea;
ALTER TABLE invites ADD COLUMN legacy_id text, ADD COLUMN legacy_fingerprint bytea;
CREATE UNIQUE INDEX users_app_legacy_id ON users (app_ref, legacy_id) WHERE legacy_id IS NOT NULL;
CREATE UNIQUE INDEX signups_app_legacy_id ON signups (app_ref, legacy_id) WHERE legacy_id IS NOT NULL;
CREATE UNIQUE INDEX invites_app_legacy_id ON invites (app_ref, legacy_id) WHERE legacy_id IS NOT NULL;

-- One row per (import source, collection): rows of that collection's file already committed.
CREATE TABLE legacy_import_checkpoints (
    source     text NOT NULL,
    collection text NOT NULL,
    rows_done  bigint NOT NULL,
    PRIMARY KEY (source, collection)
);

-- The legacy server's public key: access tokens it signed (which never expired) are accepted for
-- the users they name until accept_until.
CREATE TABLE legacy_token_keys (
    fingerprint    bytea PRIMARY KEY,          -- SHA-256 of the PEM
    public_key_pem text NOT NULL,
    accept_until   timestamptz NOT NULL
);

-- The import's report: every refused, adjusted, replaced or lost row, written in the transaction of
-- the batch it belongs to (so a resumed import keeps the entries of the batches before the crash);
-- the JSON report file is exported from here at the end of each run.
CREATE TABLE legacy_import_report (
    seq        bigserial,
    source     text NOT NULL,
    collection text NOT NULL,
    legacy_id  text NOT NULL,
    action     text NOT NULL,
    reason     text NOT NULL,
    entry      jsonb NOT NULL,
    PRIMARY KEY (source, collection, legacy_id, action, reason)
);

-- Legacy apps cloned through the legacy ZIP import share a key pair: a key id is unique per app.
ALTER TABLE app_keys DROP CONSTRAINT app_keys_pkey, ADD PRIMARY KEY (app_ref, kid);

-- The JWT `sub` a user had on the legacy server when the import normalised its handle (legacy put
-- the stored handle, as it was, in `sub`; backends keyed by `sub` must keep seeing the same value).
ALTER TABLE users ADD COLUMN jwt_subject text;
