"""Live objects for the admin fuzzer (Tests/system/fuzz/admin.sh through hooks.py): real ids to put into path
parameters, so that every documented operation also runs against objects that exist.

Everything is made through the server's own APIs, as a client would: the admin API (operator token)
and the end-user APIs (app token; AppKey passkey ceremonies signed by Tests/system/fuzz/appkey_fuzz.py's
keys). Nothing here looks at a fuzzer's response.

`World.ids(method, template)` answers the path parameters for one operation: a live app, user, session,
identity, passkey, pending signup, invite, template, webhook endpoint, delivered webhook message or OAuth
client, as the operation needs. An operation that consumes its object (the DELETEs) gets a new one each
time; the others share a few objects, checked before each use and made again when the fuzzer has deleted
or changed them. A webhook receiver runs in this process (127.0.0.1, answers 200 to every POST) so that
an endpoint of its own gets delivered messages to replay; the server must allow it
(COSYNC_WEBHOOK_ALLOW_HTTP=1, COSYNC_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8; Tests/system/fuzz/run.sh sets them).
"""
import hashlib
import http.server
import json
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import appkey_fuzz as ak  # noqa: E402  (P-256 keys and WebAuthn ceremonies)

APP = "/admin/v1/apps"
PASSWORD = "Fuzz-seed-1"
TEMPLATES = ("signUp", "signUpLink", "clickThrough", "signUpSuccess", "resetPassword", "invite", "qrCode", "sms",
             "resetPasskey")



# --- a live OpenID provider on loopback --------------------------------------------------------------
# Upstream providers and assertion keys name URLs the server fetches when they are saved: this serves a
# discovery document whose issuer is the URL it was asked under (`/idpN`), and a JWK set of real public
# keys (`/jwks`). Started once per process (the fuzzer's: hooks.py draws its URLs from here too).
FAKE_JWKS = {"keys": [
    {"kty": "OKP", "crv": "Ed25519", "kid": "fuzz-ed", "x": "EOCIrZj49nEXxWOa6Cqd8v603RbADfygvqr64wDfIqc"},
    {"kty": "EC", "crv": "P-256", "kid": "fuzz-ec", "x": "CxvqJOV5CCVbfqxd8qSX2Lcrsn5llQS8fW1XIE-0NQA",
     "y": "_L-1KJcwizH0KdOsbe44tjFChwRr5_Qx2RmpTc053vo"},
]}
PUBLIC_KEY_PEM = ("-----BEGIN PUBLIC KEY-----\n"
                  "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEn0bUtrThrqu7lDio5XtVZkh3pS/j\n"
                  "ZEenkKNvzWVC4fP4WmRzrNrjbYHCq6WXUaIlKK1h+oLvlnGZfghT3RNDBg==\n"
                  "-----END PUBLIC KEY-----\n")
_FAKE_PROVIDER = []
_FAKE_LOCK = threading.Lock()


class _ProviderHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        base = f"http://127.0.0.1:{self.server.server_port}"
        suffix = "/.well-known/openid-configuration"
        if self.path.endswith(suffix):
            issuer = base + self.path[: -len(suffix)]
            body = {"issuer": issuer, "authorization_endpoint": issuer + "/authorize", "token_endpoint": issuer + "/token",
                    "jwks_uri": base + "/jwks", "response_types_supported": ["code"], "subject_types_supported": ["public"],
                    "id_token_signing_alg_values_supported": ["ES256", "EdDSA"]}
        elif self.path.startswith("/jwks"):
            body = FAKE_JWKS
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def fake_provider():
    """The base URL of this process's fake OpenID provider (started on first use)."""
    with _FAKE_LOCK:
        if not _FAKE_PROVIDER:
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ProviderHandler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            _FAKE_PROVIDER.append(f"http://127.0.0.1:{server.server_port}")
        return _FAKE_PROVIDER[0]


class SeedError(Exception):
    pass


class _Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class World:
    def __init__(self, base, operator):
        self.base = base.rstrip("/")
        self.admin = {"Authorization": f"Bearer {operator}"}
        self.lock = threading.RLock()
        self.r = random.Random()
        self.apps = {}        # role -> appId
        self.users = []       # (appId, userId) shared by the non-destructive user operations
        self.webhook = None   # (appId, webhookId) shared endpoint
        self.receiver = None  # (appId, webhookId, [messageId]) endpoint of the local receiver
        self.receiver_url = None
        self.client = None    # (appId, clientId) shared OAuth client
        self.made = 0         # objects made (reported at the end)

    # --- HTTP -------------------------------------------------------------------------------------
    def call(self, method, path, body=None, headers=None, form=False, want=None):
        hdrs = {"X-Forwarded-For": f"11.{self.r.randrange(256)}.{self.r.randrange(256)}.{self.r.randrange(1, 255)}"}
        hdrs.update(headers or {})
        data = None
        if body is not None:
            if form:
                data = urllib.parse.urlencode(body).encode()
                hdrs["Content-Type"] = "application/x-www-form-urlencoded"
            else:
                data = json.dumps(body).encode()
                hdrs["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                status, raw = reply.status, reply.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        try:
            value = json.loads(raw) if raw else None
        except ValueError:
            value = raw
        if want is not None and status != want:
            raise SeedError(f"{method} {path}: HTTP {status} {raw[:300]!r}")
        return status, value

    def adm(self, method, path, body=None, want=None):
        return self.call(method, path, body, self.admin, want=want)

    def exists(self, path):
        return self.adm("GET", path)[0] == 200

    # --- apps -------------------------------------------------------------------------------------
    SETTINGS = {
        "main": {"signupFlow": "code"},
        "users": {"signupFlow": "none", "anonymousLoginEnabled": True, "locales": ["EN", "FR"]},
        "signups": {"signupFlow": "code"},
        "appkey": {"product": "appKey", "rpId": ak.RP_ID, "anonymousLoginEnabled": True, "passkeysPerUser": 10},
        "hooks": {},
    }

    def new_app(self, role):
        settings = dict(self.SETTINGS[role], name=f"Seed {role} {uuid.uuid4().hex[:8]}")
        _, app = self.adm("POST", APP, settings, want=201)
        self.made += 1
        return app

    def app(self, role, fresh=False):
        """A live app of this role, with its current settings (app token included)."""
        app_id = self.apps.get(role)
        if app_id and not fresh:
            status, app = self.adm("GET", f"{APP}/{app_id}")
            if status == 200 and all(app.get(k) == v for k, v in self.SETTINGS[role].items() if k != "name"):
                return app
        app = self.new_app(role)
        self.apps[role] = app["appId"]
        return app

    def with_app(self, role, make):
        """make(app), once more with a new app of the role when the current one no longer serves."""
        try:
            return make(self.app(role))
        except SeedError:
            return make(self.app(role, fresh=True))

    # --- users ------------------------------------------------------------------------------------
    def new_user(self, app):
        handle = f"seed-{uuid.uuid4().hex[:12]}@fuzz.test"
        _, user = self.adm("POST", f"{APP}/{app['appId']}/users", {"handle": handle, "password": PASSWORD}, want=201)
        self.made += 1
        return {"appId": app["appId"], "userId": user["userId"], "handle": handle}

    def new_anonymous(self, app):
        handle = "ANON_" + str(uuid.uuid4()).upper()
        _, tokens = self.call("POST", "/api/appuser/loginAnonymous", {"handle": handle},
                              {"app-token": app["appToken"]}, form=True, want=200)
        return {"appId": app["appId"], "userId": self.user_id(app, handle), "handle": handle}

    def user_id(self, app, handle):
        _, page = self.adm("GET", f"{APP}/{app['appId']}/users?" + urllib.parse.urlencode({"query": handle}), want=200)
        for user in page.get("users", []):
            if user.get("handle") == handle:
                self.made += 1
                return user["userId"]
        raise SeedError(f"user {handle} not found after it was made")

    def new_session(self, app):
        user = self.new_user(app)
        self.call("POST", "/api/appuser/login",
                  {"handle": user["handle"], "password": hashlib.md5(PASSWORD.encode()).hexdigest()},
                  {"app-token": app["appToken"]}, form=True, want=200)
        _, page = self.adm("GET", f"{APP}/{app['appId']}/users/{user['userId']}/sessions", want=200)
        if not page.get("sessions"):
            raise SeedError("a login made no session")
        return dict(user, sessionId=page["sessions"][0]["sessionId"])

    def new_passkey_user(self, app, passkeys=2):
        """An anonymous AppKey user with `passkeys` passkeys (loginAnonymous, then addPasskey)."""
        token = {"app-token": app["appToken"]}
        key, credential = ak.Key(self.r), self.r.randbytes(20)
        handle = "ANON_" + str(uuid.uuid4()).upper()
        _, options = self.call("POST", "/api/appuser/loginAnonymous", {"handle": handle}, token, want=200)
        reg = ak.registration(key, credential, options["challenge"], self.r)
        _, user = self.call("POST", "/api/appuser/loginAnonymousComplete", {
            "handle": handle, "id": ak.b64url(credential),
            "response": {"clientDataJSON": ak.b64url(reg["clientDataJSON"]),
                         "attestationObject": ak.b64url(reg["attestationObject"])},
        }, token, want=200)
        for _ in range(passkeys - 1):
            access = {"access-token": user["access-token"]}
            _, options = self.call("POST", "/api/appuser/addPasskey", {}, access, want=200)
            key2, credential2 = ak.Key(self.r), self.r.randbytes(20)
            reg = ak.registration(key2, credential2, options["challenge"], self.r)
            self.call("POST", "/api/appuser/addPasskeyComplete", {
                "id": ak.b64url(credential2),
                "response": {"clientDataJSON": ak.b64url(reg["clientDataJSON"]),
                             "attestationObject": ak.b64url(reg["attestationObject"])},
            }, access, want=200)
        return {"appId": app["appId"], "userId": self.user_id(app, handle), "handle": handle}

    def shared_user(self):
        """One of a few live users (password, anonymous, AppKey passkey users), made again when gone."""
        while len(self.users) < 6:
            kind = len(self.users) % 3
            if kind == 0:
                user = self.with_app("users", self.new_user)
            elif kind == 1:
                user = self.with_app("users", self.new_anonymous)
            else:
                user = self.with_app("appkey", self.new_passkey_user)
            self.users.append((user["appId"], user["userId"]))
        index = self.r.randrange(len(self.users))
        app_id, user_id = self.users[index]
        if self.exists(f"{APP}/{app_id}/users/{user_id}"):
            return {"appId": app_id, "userId": user_id}
        del self.users[index]
        return self.shared_user()

    def identity(self):
        """A user and one of its identities: a password user (one identity), an anonymous user, or an
        AppKey user with two passkeys (detaching one of them succeeds)."""
        kind = self.r.randrange(3)
        if kind == 0:
            user = self.with_app("users", self.new_user)
        elif kind == 1:
            user = self.with_app("users", self.new_anonymous)
        else:
            user = self.with_app("appkey", self.new_passkey_user)
        _, page = self.adm("GET", f"{APP}/{user['appId']}/users/{user['userId']}/identities", want=200)
        if not page.get("identities"):
            raise SeedError("a user without identities")
        return {"appId": user["appId"], "userId": user["userId"],
                "identityId": self.r.choice(page["identities"])["identityId"]}

    def passkey(self):
        user = self.with_app("appkey", self.new_passkey_user)
        _, page = self.adm("GET", f"{APP}/{user['appId']}/users/{user['userId']}/passkeys", want=200)
        return {"appId": user["appId"], "userId": user["userId"],
                "passkeyId": self.r.choice(page["passkeys"])["passkeyId"]}

    # --- signups, invites, templates ---------------------------------------------------------------
    def signup(self):
        def make(app):
            handle = f"signup-{uuid.uuid4().hex[:12]}@fuzz.test"
            self.call("POST", "/api/appuser/signup",
                      {"handle": handle, "password": hashlib.md5(PASSWORD.encode()).hexdigest()},
                      {"app-token": app["appToken"]}, form=True, want=200)
            return self.record(app, "signups", handle)
        return self.with_app("signups", make)

    def invite(self):
        def make(app):
            handle = f"invite-{uuid.uuid4().hex[:12]}@fuzz.test"
            self.adm("POST", f"{APP}/{app['appId']}/invites", {"handle": handle}, want=201)
            return self.record(app, "invites", handle)
        return self.with_app("main", make)

    def record(self, app, kind, handle):
        _, page = self.adm("GET", f"{APP}/{app['appId']}/{kind}?limit=100", want=200)
        for item in page.get(kind, []):
            if item.get("handle") == handle:
                self.made += 1
                return {"appId": app["appId"], "id": item["id"]}
        raise SeedError(f"{kind}: {handle} not listed after it was made")

    def template(self):
        def make(app):
            name, locale = self.r.choice(TEMPLATES), self.r.choice(app.get("locales") or ["EN"])
            self.adm("PUT", f"{APP}/{app['appId']}/email-templates/{name}/{locale}",
                     {"html": "<p>Seeded {{code}}</p>", "subject": "Seeded"}, want=200)
            self.made += 1
            return {"appId": app["appId"], "template": name, "locale": locale}
        return self.with_app("main", make)

    # --- webhooks ---------------------------------------------------------------------------------
    def new_webhook(self, app, url="https://93.184.215.14/seed", events=("user.created",)):
        _, hook = self.adm("POST", f"{APP}/{app['appId']}/webhooks", {"url": url, "eventTypes": list(events)}, want=201)
        self.made += 1
        return {"appId": app["appId"], "webhookId": hook["webhookId"]}

    def shared_webhook(self):
        if self.webhook and self.exists(f"{APP}/{self.webhook[0]}/webhooks/{self.webhook[1]}"):
            return {"appId": self.webhook[0], "webhookId": self.webhook[1]}
        hook = self.with_app("hooks", self.new_webhook)
        self.webhook = (hook["appId"], hook["webhookId"])
        return hook

    def start_receiver(self):
        if self.receiver_url is None:
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.receiver_url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        return self.receiver_url

    def message(self):
        """An endpoint of the local receiver and one of its delivered messages (replayed ones are
        delivered again within moments; a changed or deleted endpoint is made again)."""
        if self.receiver:
            app_id, hook_id, messages = self.receiver
            status, hook = self.adm("GET", f"{APP}/{app_id}/webhooks/{hook_id}")
            if status == 200 and hook.get("enabled") and hook.get("url") == self.receiver_url:
                return {"appId": app_id, "webhookId": hook_id, "messageId": self.r.choice(messages)}
        url = self.start_receiver()
        app = self.new_app("hooks")
        hook = self.new_webhook(app, url)
        for _ in range(4):
            self.new_user(app)
        messages = set()
        for _ in range(100):  # deliveries go out within moments
            _, page = self.adm("GET", f"{APP}/{app['appId']}/webhooks/{hook['webhookId']}/attempts?limit=100", want=200)
            messages = {a["messageId"] for a in page.get("attempts", []) if a.get("httpStatus") == 200}
            if len(messages) >= 4:
                break
            time.sleep(0.1)
        if not messages:
            raise SeedError(f"the local receiver got no delivery: {page}")
        self.receiver = (app["appId"], hook["webhookId"], sorted(messages))
        return {"appId": app["appId"], "webhookId": hook["webhookId"], "messageId": self.r.choice(sorted(messages))}

    # --- OAuth clients ------------------------------------------------------------------------------
    def new_client(self, app):
        """A confidential client (client_secret_basic: its secret can be rotated)."""
        _, client = self.adm("POST", f"{APP}/{app['appId']}/oauth/clients", {
            "name": "Seed client", "kind": "confidential", "redirectUris": ["https://app.example.com/callback"],
        }, want=201)
        self.made += 1
        return {"appId": app["appId"], "clientId": client["clientId"]}

    def shared_client(self):
        if self.client and self.exists(f"{APP}/{self.client[0]}/oauth/clients/{self.client[1]}"):
            return {"appId": self.client[0], "clientId": self.client[1]}
        client = self.with_app("main", self.new_client)
        self.client = (client["appId"], client["clientId"])
        return client

    # --- upstream providers and assertion keys -----------------------------------------------------
    def new_upstream(self, app):
        _, made = self.adm("POST", f"{APP}/{app['appId']}/oauth/upstream-providers", {
            "name": "Seed provider", "discoveryUrl": f"{fake_provider()}/idp{uuid.uuid4().hex}", "clientId": "seed-client",
            "clientSecret": "seed-secret",
        }, want=201)
        self.made += 1
        return {"appId": app["appId"], "providerId": made["providerId"]}

    def new_assertion_key(self, app):
        _, made = self.adm("POST", f"{APP}/{app['appId']}/oauth/assertion-keys", {
            "issuer": f"seed-backend-{uuid.uuid4().hex[:8]}", "pem": PUBLIC_KEY_PEM,
        }, want=201)
        self.made += 1
        return {"appId": app["appId"], "keyId": made["keyId"]}

    # --- per operation ----------------------------------------------------------------------------
    def ids(self, method, template):
        """Real path parameters for an operation (method, path template), or None for an unknown one."""
        with self.lock:
            return self._ids(method.upper(), template)

    def _ids(self, method, template):
        parts = template.split("/")
        if template == "/apps/{appId}/.well-known/jwks.json":
            return {"appId": self.app("main")["appId"]}
        if not template.startswith(APP + "/{appId}"):
            return None
        rest = "/".join(parts[5:])
        if rest == "":
            if method == "DELETE":
                return {"appId": self.new_app("main")["appId"]}
            return {"appId": self.app("main")["appId"]}
        if "{" not in rest:
            return {"appId": self.app("main")["appId"]}
        if rest == "users/{userId}" and method == "DELETE":
            return {k: v for k, v in self.with_app("users", self.new_user).items() if k in ("appId", "userId")}
        if rest == "users/{userId}/sessions/{sessionId}":
            user = self.with_app("users", self.new_session)
            return {"appId": user["appId"], "userId": user["userId"], "sessionId": user["sessionId"]}
        if rest == "users/{userId}/identities/{identityId}":
            return self.identity()
        if rest == "users/{userId}/passkeys/{passkeyId}":
            return self.passkey()
        if rest == "users/{userId}/upgrade" and self.r.random() < 0.5:
            user = self.with_app("users", self.new_anonymous)
            return {"appId": user["appId"], "userId": user["userId"]}
        if rest.startswith("users/{userId}"):
            return self.shared_user()
        if rest == "signups/{id}":
            return self.signup()
        if rest == "invites/{id}":
            return self.invite()
        if rest.startswith("email-templates/"):
            if method == "PUT":
                app = self.app("main")
                return {"appId": app["appId"], "template": self.r.choice(TEMPLATES),
                        "locale": self.r.choice(app.get("locales") or ["EN"])}
            return self.template()
        if rest == "webhooks/{webhookId}/messages/{messageId}/replay":
            return self.message()
        if rest == "webhooks/{webhookId}" and method == "DELETE":
            return self.with_app("hooks", self.new_webhook)
        if rest.startswith("webhooks/{webhookId}"):
            return self.shared_webhook()
        if rest == "oauth/clients/{clientId}" and method == "DELETE":
            return self.with_app("main", self.new_client)
        if rest.startswith("oauth/clients/{clientId}"):
            return self.shared_client()
        if rest.startswith("oauth/upstream-providers/{providerId}"):
            return self.with_app("main", self.new_upstream)
        if rest.startswith("oauth/assertion-keys/{keyId}"):
            return self.with_app("main", self.new_assertion_key)
        return None
