-- 0015: OAuth 2.1 and OpenID Connect (<doc:OAuth>). Every table belongs to one app and goes with it.
--
-- An app is an issuer (`{public URL}/apps/{appId}`). Its clients ask for codes at the authorization
-- endpoint, sign the user in on the hosted login page, and trade codes and refresh tokens at the token
-- endpoint. A sign-in through OAuth is a session like any other (`sessions`), so every existing
-- revocation (password change, sign out everywhere, suspension, detach) ends what OAuth issued on it.

-- A registered client of an app. `client_id` is public; a confidential client's secret is stored as
-- its SHA-256 (it is 256 random bits, shown once), a private_key_jwt client's keys as a JWKS document or
-- a JWKS URL. Lifetimes are seconds.
CREATE TABLE oauth_clients (
    id                        uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_ref                   bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    client_id                 text NOT NULL UNIQUE CHECK (length(client_id) BETWEEN 1 AND 128),
    name                      text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    kind                      text NOT NULL CHECK (kind IN ('public', 'confidential')),
    auth_method               text NOT NULL CHECK (auth_method IN ('none', 'client_secret_basic', 'client_secret_post', 'private_key_jwt')),
    secret_hash               bytea,
    jwks                      jsonb,
    jwks_uri                  text,
    redirect_uris             text[] NOT NULL DEFAULT '{}',
    post_logout_redirect_uris text[] NOT NULL DEFAULT '{}',
    grant_types               text[] NOT NULL,
    scopes                    text[] NOT NULL,
    access_token_seconds      integer NOT NULL CHECK (access_token_seconds BETWEEN 60 AND 86400),
    refresh_sliding_seconds   integer NOT NULL CHECK (refresh_sliding_seconds BETWEEN 60 AND 31536000),
    refresh_absolute_seconds  integer NOT NULL CHECK (refresh_absolute_seconds BETWEEN 60 AND 31536000),
    refresh_grace_seconds     integer NOT NULL CHECK (refresh_grace_seconds BETWEEN 0 AND 300),
    dpop_required             boolean NOT NULL,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'public') = (auth_method = 'none'))
);
CREATE INDEX oauth_clients_app ON oauth_clients (app_ref, created_at);

-- An authorization request waiting for its user: made by the authorization endpoint (or pushed,
-- RFC 9126) and carried through the hosted login page by an opaque reference whose SHA-256 is the key.
-- `params` holds the validated request (redirect_uri, scope, state, nonce, code_challenge, prompt,
-- max_age, login_hint, dpop_jkt, …). Deleted when it is answered or when it expires.
CREATE TABLE oauth_requests (
    handle_hash bytea PRIMARY KEY,
    app_ref     bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    client_ref  uuid NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
    params      jsonb NOT NULL,
    pushed      boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX oauth_requests_expiry ON oauth_requests (expires_at);

-- A browser signed in on the hosted login page: its cookie's SHA-256, and the session it opened.
-- `prompt=none` and single sign-on read it; logout and every revocation of the session end it.
CREATE TABLE oauth_browser_sessions (
    token_hash bytea PRIMARY KEY,
    app_ref    bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_browser_sessions_session ON oauth_browser_sessions (session_id);

-- An authorization code: its SHA-256, single use, short-lived. `grant_ref` is set when it was
-- exchanged, so presenting it again revokes what it gave (RFC 6749 §4.1.2).
CREATE TABLE oauth_codes (
    code_hash      bytea PRIMARY KEY,
    app_ref        bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    client_ref     uuid NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
    session_id     uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    redirect_uri   text NOT NULL,
    scope          text NOT NULL,
    nonce          text,
    code_challenge text NOT NULL,
    dpop_jkt       text,
    auth_time      timestamptz NOT NULL,
    amr            text[] NOT NULL DEFAULT '{}',
    expires_at     timestamptz NOT NULL,
    used_at        timestamptz,
    grant_ref      uuid
);
CREATE INDEX oauth_codes_expiry ON oauth_codes (expires_at);

-- A grant: what one client holds on one session (the refresh-token family). Ending the session ends
-- the grant and every refresh token of it. `absolute_expires_at` bounds the family whatever the
-- rotations; `dpop_jkt` binds it to the client's key.
CREATE TABLE oauth_grants (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_ref             bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    client_ref          uuid NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
    session_id          uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    user_id             uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    scope               text NOT NULL,
    dpop_jkt            text,
    auth_time           timestamptz NOT NULL,
    amr                 text[] NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now(),
    absolute_expires_at timestamptz NOT NULL
);
CREATE INDEX oauth_grants_session ON oauth_grants (session_id);
CREATE INDEX oauth_grants_client ON oauth_grants (client_ref);
ALTER TABLE oauth_codes ADD CONSTRAINT oauth_codes_grant FOREIGN KEY (grant_ref) REFERENCES oauth_grants (id) ON DELETE SET NULL;

-- One refresh token of a grant, by its SHA-256. Rotation marks it (`rotated_at`) and seals its
-- successor in `successor_sealed`, so a retried or concurrent refresh inside the client's grace window
-- answers the same successor; after the window, presenting it again revokes the whole grant's session.
CREATE TABLE oauth_refresh_tokens (
    token_hash       bytea PRIMARY KEY,
    grant_ref        uuid NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    created_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,
    rotated_at       timestamptz,
    successor_hash   bytea,
    successor_sealed bytea
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens (grant_ref);
CREATE INDEX oauth_refresh_tokens_expiry ON oauth_refresh_tokens (expires_at);

-- DPoP proofs seen (RFC 9449 §11.1): a proof's `jti` is accepted once per key while its `iat` is inside
-- the acceptance window; rows are deleted when they leave it, so the table stays bounded.
CREATE TABLE oauth_dpop_proofs (
    jkt        text NOT NULL,
    jti        text NOT NULL CHECK (length(jti) BETWEEN 1 AND 256),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (jkt, jti)
);
CREATE INDEX oauth_dpop_proofs_expiry ON oauth_dpop_proofs (expires_at);
