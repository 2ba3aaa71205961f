-- 0016: client assertions seen (private_key_jwt, RFC 7523 §2.2 and OpenID Connect Core §9).
--
-- A confidential client that authenticates with a JWT signed by its own key names the JWT by `jti`;
-- an assertion is accepted once. The row lives until the assertion's `exp` (at most five minutes
-- ahead: the token endpoint refuses later ones), so the table stays bounded by the assertions of
-- the last few minutes; the housekeeping pass deletes rows once they expire. A row whose assertion
-- expired may also be taken over by a new assertion with the same `jti` before that pass runs.
CREATE TABLE oauth_client_assertions (
    client_ref uuid NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
    jti        text NOT NULL CHECK (length(jti) BETWEEN 1 AND 256),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (client_ref, jti)
);
CREATE INDEX oauth_client_assertions_expiry ON oauth_client_assertions (expires_at);
