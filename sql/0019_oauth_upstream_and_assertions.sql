-- 0019: the two sign-in methods of Orange Webcom's service that OAuth brings (<doc:OAuth> §8).
--
-- "Custom": an app's own backend vouches for a user with a short-lived JWT signed by a key registered
-- on the app (RFC 7523 JWT-bearer grant). "OAuth2": an app signs users in through any OpenID provider
-- it configures (upstream providers), on the hosted page or by exchanging that provider's ID token.
-- Both sign in through an identity of a new kind, so a session knows what opened it and a detach ends
-- exactly those sessions: `custom` (subject: the assertion's `sub`) and `oidc` (subject:
-- `<provider issuer>|<sub>`). Neither ever joins an existing account by e-mail.
--
-- The CHECKs are widened, never narrowed (a node of the previous release writes none of the new
-- values). Each is added NOT VALID and validated afterwards, so the scan of existing rows does not
-- hold the table's exclusive lock.
ALTER TABLE identities DROP CONSTRAINT identities_kind_check;
ALTER TABLE identities ADD CONSTRAINT identities_kind_check
    CHECK (kind IN ('password', 'apple', 'google', 'anonymous', 'passkey', 'custom', 'oidc')) NOT VALID;
ALTER TABLE identities VALIDATE CONSTRAINT identities_kind_check;

ALTER TABLE sessions DROP CONSTRAINT sessions_method_check;
ALTER TABLE sessions ADD CONSTRAINT sessions_method_check
    CHECK (method IN ('password', 'second_factor', 'anonymous', 'signup', 'register', 'apple', 'google', 'passkey',
                      'custom', 'oidc')) NOT VALID;
ALTER TABLE sessions VALIDATE CONSTRAINT sessions_method_check;

ALTER TABLE sessions DROP CONSTRAINT sessions_proven_by_check;
ALTER TABLE sessions ADD CONSTRAINT sessions_proven_by_check
    CHECK (proven_by IN ('password', 'second_factor', 'anonymous', 'signup', 'register', 'apple', 'google', 'passkey',
                         'custom', 'oidc')) NOT VALID;
ALTER TABLE sessions VALIDATE CONSTRAINT sessions_proven_by_check;

-- A key the app's backend signs assertions with: a public key (stored as a public JWK, whether it was
-- registered as a JWK or as a PEM), or the https URL of the backend's JWK set. `issuer` is the `iss`
-- every assertion checked with this key must carry. `kid`, when set, is the key id an assertion's
-- header names (a JWK set's keys carry their own).
CREATE TABLE oauth_assertion_keys (
    id         uuid PRIMARY KEY,
    app_ref    bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    issuer     text NOT NULL CHECK (length(issuer) BETWEEN 1 AND 512),
    kid        text CHECK (length(kid) BETWEEN 1 AND 256),
    jwk        jsonb,
    jwks_uri   text CHECK (length(jwks_uri) BETWEEN 1 AND 2048),
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((jwk IS NULL) <> (jwks_uri IS NULL))
);
CREATE INDEX oauth_assertion_keys_app ON oauth_assertion_keys (app_ref, created_at);

-- Assertions accepted, by (issuer, jti): each is accepted once, whichever node sees it (the insert
-- that finds the row taken refuses). A row lives until its assertion can no longer be accepted
-- (`expires_at`: the assertion's `exp` plus the clock-skew allowance; `exp` is at most five minutes
-- ahead), then the housekeeping pass deletes it: the table holds the last few minutes only.
CREATE TABLE oauth_assertion_jtis (
    app_ref    bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    issuer     text NOT NULL,
    jti        text NOT NULL CHECK (length(jti) BETWEEN 1 AND 256),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (app_ref, issuer, jti)
);
CREATE INDEX oauth_assertion_jtis_expiry ON oauth_assertion_jtis (expires_at);

-- An OpenID provider an app signs users in through. The endpoints come from its discovery document
-- (fetched when the provider is saved, or its discovery URL changed). The client secret is sealed
-- (SecretBox, purpose `upstream-client-secret:<id>`) and never shown again; a provider without one
-- is a public client there (PKCE only). `audiences` are further client ids of the app at that
-- provider (its native apps) whose ID tokens may be exchanged at the token endpoint. One provider per
-- issuer per app: an ID token names its provider by `iss`.
CREATE TABLE oauth_upstream_providers (
    id                     uuid PRIMARY KEY,
    app_ref                bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    name                   text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    discovery_url          text NOT NULL CHECK (length(discovery_url) BETWEEN 1 AND 2048),
    issuer                 text NOT NULL CHECK (length(issuer) BETWEEN 1 AND 512),
    authorization_endpoint text NOT NULL CHECK (length(authorization_endpoint) BETWEEN 1 AND 2048),
    token_endpoint         text NOT NULL CHECK (length(token_endpoint) BETWEEN 1 AND 2048),
    jwks_uri               text NOT NULL CHECK (length(jwks_uri) BETWEEN 1 AND 2048),
    token_auth_method      text NOT NULL CHECK (token_auth_method IN ('client_secret_basic', 'client_secret_post', 'none')),
    client_id              text NOT NULL CHECK (length(client_id) BETWEEN 1 AND 256),
    client_secret_sealed   bytea,
    scopes                 text[] NOT NULL,
    audiences              text[] NOT NULL DEFAULT '{}',
    enabled                boolean NOT NULL DEFAULT true,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    UNIQUE (app_ref, issuer),
    CHECK ((token_auth_method = 'none') = (client_secret_sealed IS NULL))
);
CREATE INDEX oauth_upstream_providers_app ON oauth_upstream_providers (app_ref, created_at);

-- A sign-in through an upstream provider on its way: started by the hosted page's button, answered at
-- the callback. Keyed by the SHA-256 of the `state` sent to the provider; `browser_hash` is the SHA-256
-- of the cookie that ties it to the browser that started it (no other browser can finish it). The
-- nonce and the PKCE verifier are what the provider's answer is checked with. `request_ref` is the
-- hosted page's reference of the authorization request the sign-in continues. Deleted when answered
-- (one use) or ten minutes after it began.
CREATE TABLE oauth_upstream_logins (
    state_hash    bytea PRIMARY KEY,
    app_ref       bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    provider_ref  uuid NOT NULL REFERENCES oauth_upstream_providers (id) ON DELETE CASCADE,
    browser_hash  bytea NOT NULL,
    request_ref   text NOT NULL CHECK (length(request_ref) BETWEEN 1 AND 512),
    nonce         text NOT NULL,
    code_verifier text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL
);
CREATE INDEX oauth_upstream_logins_expiry ON oauth_upstream_logins (expires_at);
