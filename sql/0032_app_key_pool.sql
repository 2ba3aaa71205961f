-- Issue 24: RSA-2048 key pairs generated ahead, so that creating an app (or rotating its key) does not
-- wait for key generation (tens of milliseconds of CPU each). Every key is taken once (DELETE …
-- RETURNING in the creating transaction: a rolled-back creation puts it back), so every app still gets
-- its own key pair. The private key is sealed with the master key for its kid, exactly as in app_keys,
-- so it moves there unchanged. KeyPoolFiller keeps COSYNC_KEY_POOL_SIZE keys here.
CREATE TABLE app_key_pool (
    id                  bigserial PRIMARY KEY,
    kid                 text NOT NULL UNIQUE,
    public_key_pem      text NOT NULL,
    private_key_sealed  bytea NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now()
);
