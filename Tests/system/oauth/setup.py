"""Makes what the OAuth system tests use, through the server's own APIs, and writes it as JSON.

An app (admin API, operator token; signup flow `none` so a signup signs the user in at once), its OAuth
clients (admin API, /admin/v1/apps/{appId}/oauth/clients), and a few users (end-user API signup, the
password sent as MD5 hex as the Cosync SDKs do). Each test file signs in as its own user, so that one
file's failed logins or revocations cannot disturb another's.

Usage: setup.py --base http://127.0.0.1:PORT --operator-token TOKEN --out world.json
"""
import argparse
import hashlib
import json
import sys
import uuid

import requests

PASSWORD = "OAuth-test-1"
USERS = ("authlib", "idpyoidc", "basic", "exchange", "browser", "dpop")
# Loopback redirect URIs (RFC 8252 §7.3): registered without a port, asked for with any port. Nothing
# listens there; the tests read the Location header instead.
NATIVE_REDIRECTS = ["http://127.0.0.1/callback", "com.example.oauthtest:/callback"]
WEB_REDIRECTS = ["http://127.0.0.1/rp/callback"]
WEB_LOGGED_OUT = ["http://127.0.0.1/rp/logged-out"]
SCOPES = ["openid", "profile", "email", "phone", "offline_access"]
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"

# name -> registration body. Lifetimes are seconds. DPoP is off for these (the DPoP client has its own).
CLIENTS = {
    "native": {
        "name": "Authlib native app", "kind": "public", "tokenEndpointAuthMethod": "none",
        "redirectUris": NATIVE_REDIRECTS, "grantTypes": ["authorization_code", "refresh_token", EXCHANGE],
        "scopes": SCOPES, "refreshGraceSeconds": 30, "dpopRequired": False,
    },
    # grace of 1 s: the reuse-detection test waits it out
    "native_short_grace": {
        "name": "Native app, short grace", "kind": "public", "tokenEndpointAuthMethod": "none",
        "redirectUris": NATIVE_REDIRECTS, "grantTypes": ["authorization_code", "refresh_token"],
        "scopes": SCOPES, "refreshGraceSeconds": 1, "dpopRequired": False,
    },
    "web": {
        "name": "Web relying party", "kind": "confidential", "tokenEndpointAuthMethod": "client_secret_basic",
        "redirectUris": WEB_REDIRECTS, "postLogoutRedirectUris": WEB_LOGGED_OUT, "grantTypes": ["authorization_code", "refresh_token"],
        "scopes": SCOPES, "refreshGraceSeconds": 30, "dpopRequired": False,
    },
    "web_post": {
        "name": "Web relying party (client_secret_post)", "kind": "confidential", "tokenEndpointAuthMethod": "client_secret_post",
        "redirectUris": WEB_REDIRECTS, "grantTypes": ["authorization_code", "refresh_token"],
        "scopes": SCOPES, "refreshGraceSeconds": 30, "dpopRequired": False,
    },
    # an app backend: client credentials and introspection
    "backend": {
        "name": "App backend", "kind": "confidential", "tokenEndpointAuthMethod": "client_secret_basic",
        "redirectUris": [], "grantTypes": ["client_credentials"], "scopes": ["api:read", "api:write"],
        "refreshGraceSeconds": 30, "dpopRequired": False,
    },
}


class SetupError(Exception):
    pass


def call(method, url, want, **kwargs):
    reply = requests.request(method, url, timeout=30, **kwargs)
    if reply.status_code != want:
        raise SetupError(f"{method} {url}: expected HTTP {want}, got {reply.status_code}: {reply.text[:500]}")
    return reply.json() if reply.content else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--operator-token", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    base = args.base.rstrip("/")
    admin = {"Authorization": f"Bearer {args.operator_token}"}

    app = call("POST", f"{base}/admin/v1/apps", 201, headers=admin,
               json={"name": f"OAuth system tests {uuid.uuid4().hex[:8]}", "signupFlow": "none"})
    app_id, app_token = app["appId"], app["appToken"]

    clients = {}
    for name, body in CLIENTS.items():
        made = call("POST", f"{base}/admin/v1/apps/{app_id}/oauth/clients", 201, headers=admin, json=body)
        for field in ("tokenEndpointAuthMethod", "redirectUris", "grantTypes", "refreshGraceSeconds", "dpopRequired"):
            if made.get(field) != body[field]:
                raise SetupError(f"client {name}: {field} is {made.get(field)!r} after registering {body[field]!r}")
        client = {"clientId": made["clientId"], "authMethod": body["tokenEndpointAuthMethod"], "scopes": body["scopes"],
                  "redirectURIs": body["redirectUris"], "postLogoutRedirectURIs": body.get("postLogoutRedirectUris", []),
                  "refreshGraceSeconds": body["refreshGraceSeconds"]}
        if body["kind"] == "confidential":
            if not isinstance(made.get("clientSecret"), str):
                raise SetupError(f"client {name}: no clientSecret in the creation answer")
            client["clientSecret"] = made["clientSecret"]
        clients[name] = client

    users = {}
    for name in USERS:
        handle = f"oauth-{name}-{uuid.uuid4().hex[:8]}@oauth.test"
        signed = call("POST", f"{base}/api/appuser/signup", 200, headers={"app-token": app_token},
                      data={"handle": handle, "password": hashlib.md5(PASSWORD.encode()).hexdigest()})
        if not isinstance(signed, dict) or "access-token" not in signed:
            raise SetupError(f"signup of {handle} did not sign in: {signed!r}")
        found = call("GET", f"{base}/admin/v1/apps/{app_id}/users", 200, headers=admin, params={"query": handle})
        ids = [u["userId"] for u in found.get("users", []) if u.get("handle") == handle]
        if len(ids) != 1:
            raise SetupError(f"user {handle} not found after signup: {found!r}")
        users[name] = {"handle": handle, "password": PASSWORD, "userId": ids[0]}

    world = {"base": base, "issuer": f"{base}/apps/{app_id}", "appId": app_id, "appToken": app_token,
             "operatorToken": args.operator_token, "clients": clients, "users": users}
    with open(args.out, "w") as out:
        json.dump(world, out, indent=2)
    print(f"oauth setup: app {app_id}, clients {', '.join(clients)}, users {', '.join(users)}", file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except (SetupError, requests.RequestException, KeyError, ValueError) as error:
        print(f"oauth setup: {error}", file=sys.stderr)
        sys.exit(1)
