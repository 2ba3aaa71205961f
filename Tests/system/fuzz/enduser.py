#!/usr/bin/env python3
"""End-user API fuzzer: hostile requests against every /api/appuser endpoint of a running server.

Python 3 standard library only. Usage:
    enduser.py --base http://127.0.0.1:PORT --operator-token TOKEN [--requests 100000] [--seed N]
               [--connections 24] [--only INDEX ...]

It creates its own apps through the admin API, signs up real users, collects real token shapes
(app-token, access-token, login-token, user JWT, tokens of another app), then sends generated hostile
requests over raw keep-alive sockets. Request i is generated from random.Random(f"{seed}:{i}") alone,
so a failing request is reproduced with `--seed S --only i`.

Pass condition for every reply: a complete HTTP response, status below 500, and not the body
{"code":500,"message":"internal server error"}. A connection closed or reset before a complete
response is a failure ("dropped connection"). At the end, a normal login of a real user must work.
Exit status 0 on a pass, 1 on a failure (the failing requests are listed), 2 on a set-up error.
"""

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import os
import random
import struct
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import appkey_fuzz  # noqa: E402  (the AppKey passkey requests)

# The share of requests that go to the AppKey API with mutated WebAuthn payloads.
APPKEY_SHARE = 0.15

ENDPOINTS = [
    "getApplication", "login", "loginAnonymous", "signup", "completeSignup", "invite", "register",
    "forgotPassword", "resetPassword", "changePassword", "getUser", "setUserMetadata", "setUserName",
    "userNameAvailable", "setLocale", "deleteAccount", "loginComplete", "socialLogin", "socialSignup", "setPhone",
    "verifyPhone", "setTwoFactorPhoneVerification", "setTwoFactorGoogleVerification", "appleLogin", "googleLogin",
    "appleSignup", "googleSignup",
]
GET_ENDPOINTS = {"getApplication", "getUser", "userNameAvailable", "completeSignup"}
FIELD_NAMES = [
    "handle", "password", "newPassword", "code", "metaData", "locale", "token", "userName", "twoFactor",
    "senderUserId", "provider", "phone", "loginToken", "appToken", "idToken", "email", "name",
]
BODY_LIMIT = 1_048_576
INTERNAL = b'"internal server error"'


def md5hex(text):
    return hashlib.md5(text.encode()).hexdigest()


def b64url(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def totp(secret_key, at=None):
    key = base64.b32decode(secret_key.replace(" ", "").upper() + "=" * (-len(secret_key.replace(" ", "")) % 8))
    counter = int((at or time.time()) // 30)
    digest = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    value = (struct.unpack(">I", digest[offset:offset + 4])[0] & 0x7FFFFFFF) % 1_000_000
    return f"{value:06d}"


# ---------------------------------------------------------------------------------------------------
# set-up through the admin API and the end-user API (plain, well-formed requests)

class SetupError(Exception):
    pass


def http(base, method, path, body=None, headers=None, form=False):
    data = None
    hdrs = dict(headers or {})
    if body is not None:
        if form:
            data = body.encode()
        else:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
    request = urllib.request.Request(base + path, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def expect(status, body, wanted, what):
    if status != wanted:
        raise SetupError(f"{what}: HTTP {status} {body[:300]!r}")
    try:
        return json.loads(body)
    except ValueError:
        return body


def form(pairs):
    return "&".join(f"{k}={v}" for k, v in pairs)


def setup(base, operator, seed):
    admin = {"Authorization": f"Bearer {operator}"}
    tag = f"{seed}-{os.getpid()}"
    app_a = expect(*http(base, "POST", "/admin/v1/apps", {
        "name": f"Fuzz A {tag}", "signupFlow": "none", "anonymousLoginEnabled": True, "userNamesEnabled": True,
        "maxLoginAttempts": 1000, "twoFactorVerification": "google", "locales": ["EN", "FR"],
        "metaData": [{"path": "user.name", "fieldName": "name", "canEdit": True}],
    }, admin), 201, "create app A")
    app_b = expect(*http(base, "POST", "/admin/v1/apps", {"name": f"Fuzz B {tag}", "signupFlow": "code"}, admin),
                   201, "create app B")
    app_c = expect(*http(base, "POST", "/admin/v1/apps", {"name": f"Fuzz C {tag}", "signupFlow": "none"}, admin),
                   201, "create app C")
    for app in (app_a, app_b, app_c):
        for key in ("appId", "appToken", "rawPublicKey"):
            if not isinstance(app.get(key), str):
                raise SetupError(f"create app: no {key} in {app}")

    def signup(app, handle, password):
        return expect(*http(base, "POST", "/api/appuser/signup",
                            form([("handle", handle), ("password", md5hex(password)),
                                  ("metaData", '{"user":{"name":"Fuzz"}}')]),
                            {"app-token": app["appToken"]}, form=True), 200, f"signup {handle}")

    canary = {"handle": f"canary-{tag}@fuzz.test", "password": "Canary-pw-1"}
    victim = {"handle": f"victim-{tag}@fuzz.test", "password": "Victim-pw-1"}
    second = {"handle": f"totp-{tag}@fuzz.test", "password": "Totp-pw-1"}
    signup(app_a, canary["handle"], canary["password"])
    victim_tokens = signup(app_a, victim["handle"], victim["password"])
    second_tokens = signup(app_a, second["handle"], second["password"])
    # Tokens of another app: a user of app C with the victim's handle.
    foreign_tokens = signup(app_c, victim["handle"], victim["password"])
    for tokens in (victim_tokens, second_tokens, foreign_tokens):
        if not isinstance(tokens, dict) or "access-token" not in tokens or "jwt" not in tokens:
            raise SetupError(f"signup (flow none) gave no tokens: {tokens}")
    # A real login-token: the second user turns the authenticator on (app mode google) and logs in.
    setup_reply = expect(*http(base, "POST", "/api/appuser/setTwoFactorGoogleVerification", "twoFactor=true",
                               {"access-token": second_tokens["access-token"]}, form=True), 200, "enable TOTP")
    login_reply = expect(*http(base, "POST", "/api/appuser/login",
                               form([("handle", second["handle"]), ("password", md5hex(second["password"]))]),
                               {"app-token": app_a["appToken"]}, form=True), 200, "login with TOTP")
    if "login-token" not in login_reply:
        raise SetupError(f"login of a TOTP user gave no login-token: {login_reply}")
    appkey = appkey_fuzz.setup(base, admin, http, expect, tag)
    return {
        "base": base, "operator": operator, "appkey": appkey,
        "app": app_a, "other": app_b,
        "canary": canary, "victim": victim,
        "access": victim_tokens["access-token"], "jwt": victim_tokens["jwt"],
        "access2": second_tokens["access-token"], "login_token": login_reply["login-token"],
        "foreign": [foreign_tokens["access-token"], foreign_tokens["jwt"], app_c["appToken"]],
        "kid": json.loads(base64.urlsafe_b64decode(victim_tokens["access-token"].split(".")[0] + "==")).get("kid"),
        "totp_key": setup_reply.get("googleSecretKey", ""),
    }


def final_check(state):
    try:
        return final_login(state)
    except OSError as error:
        return f"final login failed: {error}"


def final_login(state):
    canary = state["canary"]
    status, body = http(state["base"], "POST", "/api/appuser/login",
                        form([("handle", canary["handle"]), ("password", md5hex(canary["password"]))]),
                        {"app-token": state["app"]["appToken"]}, form=True)
    try:
        tokens = json.loads(body)
    except ValueError:
        tokens = {}
    if status != 200 or "access-token" not in tokens or "jwt" not in tokens:
        return f"final login failed: HTTP {status} {body[:300]!r}"
    status, body = http(state["base"], "GET", "/api/appuser/getUser", headers={"access-token": tokens["access-token"]})
    if status != 200 or canary["handle"].encode() not in body:
        return f"final getUser failed: HTTP {status} {body[:300]!r}"
    return None


# ---------------------------------------------------------------------------------------------------
# generation

class Blobs:
    """Large values made once (the generator slices them)."""

    def __init__(self):
        r = random.Random(12345)
        alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789"
        table = bytes(alphabet[b % len(alphabet)] for b in range(256))
        self.ascii = r.randbytes(BODY_LIMIT + 4096).translate(table)
        self.binary = r.randbytes(70_000)


def garbled(r, token):
    if not token:
        return "x"
    choice = r.randrange(8)
    if choice == 0:
        return token[: r.randrange(len(token))]
    if choice == 1:
        i = r.randrange(len(token))
        return token[:i] + r.choice("A_-.=+/%\x7f") + token[i + 1:]
    if choice == 2:
        parts = token.split(".")
        r.shuffle(parts)
        return ".".join(parts)
    if choice == 3:
        return token + "." + token
    if choice == 4:
        return token.replace(".", "..", 1)
    if choice == 5:
        return token[::-1]
    if choice == 6:
        return " " + token + " "
    return token.upper()


def weird_number(r):
    return r.choice([
        9 ** 40, -(9 ** 40), 2 ** 63, 2 ** 64, -2 ** 63 - 1, -1, 0, 1e308, -1e308, 1.5, 2 ** 31, 253402300800,
        -62135596801, 8.64e15 + 1, 99999999999999999999999999999999999999,
    ])


def forged_token(r, state):
    app = state["app"]
    other = state["other"]
    payload = r.choice([
        {"handle": state["victim"]["handle"], "appId": app["appId"], "scope": "user"},
        {"handle": state["victim"]["handle"], "appId": app["appId"], "scope": "user", "uid": "x", "ver": 0},
        {"appId": app["appId"], "scope": "app"},
        {"handle": state["canary"]["handle"], "appId": app["appId"], "scope": "login", "jti": "00000000-0000-0000-0000-000000000000"},
        {"handle": state["victim"]["handle"], "appId": other["appId"], "scope": "user"},
        {"handle": "\u0000", "appId": "\u0000", "scope": "user"},
        {},
    ])
    if r.random() < 0.6:
        for claim in r.sample(["exp", "iat", "nbf", "ver", "uid", "jti"], r.randrange(1, 4)):
            payload[claim] = r.choice([weird_number(r), "9999-12-31T23:59:59Z", None, [], {"a": 1}, "", True])
    header = r.choice([
        {"alg": "none", "typ": "JWT"}, {"alg": "None"}, {"alg": "HS256", "typ": "JWT"}, {"alg": "HS512"},
        {"alg": "RS256", "kid": "../../etc/passwd"}, {"alg": "RS256", "jku": "http://127.0.0.1:1/x"},
        {"alg": "ES256"}, {"alg": 5}, {"alg": "RS256", "crit": ["x"]}, {"typ": "JWT"},
        {"alg": "HS256", "kid": state["kid"]}, {"alg": "none", "kid": state["kid"]}, {"alg": "RS256", "kid": state["kid"]},
    ])
    signing_input = b64url(json.dumps(header)) + "." + b64url(json.dumps(payload))
    alg = header.get("alg")
    if alg == "HS256" or alg == "HS512":
        raw = app["rawPublicKey"] if r.random() < 0.5 else other["rawPublicKey"]
        key = raw.encode() if r.random() < 0.5 else base64.b64decode(raw)
        digest = hashlib.sha256 if alg == "HS256" else hashlib.sha512
        signature = b64url(hmac.new(key, signing_input.encode(), digest).digest())
    elif r.random() < 0.5:
        signature = ""
    else:
        signature = b64url(r.randbytes(r.choice([1, 64, 256])))
    return signing_input + "." + signature


def token_value(r, state, kind):
    """A value for a token slot (header app-token/access-token, loginToken, provider token)."""
    app = state["app"]
    real = {
        "app": app["appToken"] if r.random() < 0.75 else state["other"]["appToken"],
        "access": state["access"] if r.random() < 0.8 else state["access2"],
        "login": state["login_token"],
    }[kind]
    choice = r.randrange(14)
    if choice < 2:
        return real
    if choice == 4:
        return garbled(r, real)
    if choice == 5:
        return forged_token(r, state)
    if choice == 6:
        return r.choice(state["foreign"] + [state["other"]["appToken"]])
    if choice == 7:
        return r.choice([state["jwt"], state["access2"], state["login_token"], app["appToken"], state["access"]])
    if choice == 8:
        return garbled(r, r.choice([state["jwt"], state["access2"], state["other"]["appToken"]]))
    if choice == 9:
        return r.choice(["", " ", "null", "undefined", "Bearer " + real, "a.b.c", "..", "%00", "\u00e9\u00e9"])
    if choice == 10:
        return "x" * r.choice([100, 4096, 4097, 7000])
    if choice == 11:
        return forged_token(r, state)
    if choice == 12:
        return real + r.choice(["\u00ff", "\u2028", "%", "=", "=="])
    return garbled(r, real) if r.random() < 0.5 else real


def text_value(r, state, blobs, name):
    """A field value as text (the encoder may add NUL, invalid UTF-8 or huge sizes)."""
    canary = state["canary"]
    choice = r.randrange(30)
    if choice < 6:  # plausible values for the field
        return r.choice({
            "handle": [canary["handle"], state["victim"]["handle"], f"u{r.randrange(10**6)}@fuzz.test", "a%2Bb@x.com",
                       "ab cd@x.com", "noat", "@", "A@B.C"],
            "password": [md5hex(f"x{r.randrange(100)}"), md5hex("x").upper(), "0" * 32, "g" * 32, "abc"],
            "newPassword": [md5hex(f"y{r.randrange(100)}"), "", "z" * 33],
            "code": ["123456", "000000", "999999", "1" * 10, "1" * 11, "-1", "１２３４５６", " 123456 ", "1e5", "0x1F"],
            "metaData": ['{"user":{"name":"x"}}', "{}", "[]", "null", '{"user":{"name":' + '['*200 + ']'*200 + '}}',
                         '{"user":{"name":"' + "n" * 5000 + '"}}', '{"aud":"x","exp":1e400}', '{"user":null}',
                         '{"user":{"name":"a\\u0000"}}', '{"user\\u0000":{"name":"x"}}', '{"user":{"name":"\\ud800"}}',
                         '{"user":{"name":1e999}}', '{"user":{"name":["x"]}}'],
            "locale": ["EN", "fr", "ZZ", "en-US", "E", "EN\u0301"],
            "token": [forged_token(r, state), state["jwt"]],
            "userName": [f"u{r.randrange(10**6)}", "A", "1abc", "a" * 300, "ab_c", "\u0430dmin"],
            "twoFactor": ["true", "false", "TRUE", "1", "yes", ""],
            "senderUserId": ["", "x", "00000000-0000-0000-0000-000000000000"],
            "provider": ["apple", "google", "facebook", "", "APPLE"],
            "phone": ["+19195551212", " 19195551212", "19195551212", "+1" + "9" * 30, "+", "+0000000000"],
            "loginToken": [token_value(r, state, "login")],
            "appToken": [token_value(r, state, "app")],
        }.get(name, ["x", "", "1"]))
    if choice < 9:
        return str(weird_number(r))
    if choice < 11:
        return r.choice(["9999-12-31T23:59:59.999Z", "+275760-09-13T00:00:00.000Z", "-271821-04-20T00:00:00Z",
                         "0000-00-00T00:00:00Z", "2024-02-30T25:61:61Z", "1970-01-01T00:00:00Z", "NaN", "Infinity",
                         "-0", "1e-400", "18446744073709551616", "-9223372036854775809"])
    if choice == 13:
        return appkey_fuzz.mark_bomb(r, name)
    if choice < 14:
        return r.choice(["' OR 1=1 --", "'; DROP TABLE users; --", "%s%s%n", "{{handle}}", "<script>x</script>",
                         "${jndi:ldap://x}", "\\", "\"", "\u202e\u0000", "\ud83d\ude00" * 3, "\u2028\u2029",
                         "a\r\nX-Injected: 1", "\uffff\ufffe", "e\u0301\u0301\u0301", "__proto__", "constructor"])
    if choice < 17:
        return "".join(chr(r.choice([0, 1, 0x7F, 0x80, 0xFF, 0x2028, 0xFEFF, 0x1F600, ord("a"), ord("%"), ord("&"),
                                     ord("="), ord("+")])) for _ in range(r.randrange(1, 40)))
    if choice < 20:
        size = r.choice([255, 256, 300, 1000, 2000, 4096]) if r.random() < 0.97 else r.choice([10_000, 65_536, 200_000])
        return blobs.ascii[:size].decode()
    if choice < 22:
        return json.dumps(state["canary"]["handle"]) + "\u0000"
    if choice < 24:
        return forged_token(r, state)
    return "".join(chr(r.randrange(32, 0x250)) for _ in range(r.randrange(0, 64)))


def deep_json(r):
    depth = r.choice([100, 513, 600, 1000, 2000, 10_000]) if r.random() < 0.98 else 100_000
    if r.random() < 0.5:
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def json_body(r, state, blobs, names):
    choice = r.randrange(20)
    if choice == 0:
        return deep_json(r)
    if choice == 1:
        return r.choice([b"", b"{", b"null", b"[]", b"1", b'"x"', b"{}" * 3, b'{"handle":}', b"\xff\xfe{}", b"{\"a\":\"\xc3\x28\"}",
                         b'{"handle":"\\ud800"}', b'{"\\u0000":"x"}', b'{"handle":"a\\u0000b"}', b"\x00"])
    obj = {}
    for name in names:
        kind = r.randrange(12)
        if kind < 6:
            obj[name] = text_value(r, state, blobs, name)
        elif kind == 6:
            obj[name] = weird_number(r)
        elif kind == 7:
            obj[name] = r.choice([True, False, None])
        elif kind == 8:
            obj[name] = [text_value(r, state, blobs, name) for _ in range(r.randrange(3))]
        elif kind == 9:
            obj[name] = {"$ne": None, "nested": {"deeper": [1, 2, {"x": weird_number(r)}]}}
        elif kind == 10:
            obj[name] = "a\u0000b" if r.random() < 0.5 else "\u0000"
        else:
            obj[name + "\u0000"] = "x"
    if r.random() < 0.1:
        obj["\u0000"] = "\u0000"
    raw = json.dumps(obj, ensure_ascii=r.random() < 0.5).encode("utf-8", "surrogatepass")
    if r.random() < 0.05 and len(raw) > 2:  # duplicated keys
        raw = raw[:-1] + b"," + raw[1:]
    if r.random() < 0.05:  # invalid UTF-8 inside the document
        i = r.randrange(len(raw))
        raw = raw[:i] + bytes([r.choice([0x80, 0xC3, 0xFF, 0xED])]) + raw[i:]
    return raw


def form_body(r, state, blobs, names):
    choice = r.randrange(20)
    if choice == 0:
        return r.randbytes(r.randrange(1, 300))
    if choice == 1:
        return r.choice([b"", b"&&&", b"=", b"==&==", b"%", b"%%%%", b"%zz=%zz", b"a=%00", b"%00=a", b"handle&handle=1",
                         b"+=+", b"\x00=\x00", b"handle=%C3%28", b"handle=%ED%A0%80", b"&" * 5000,
                         b"a=1&" * 2000])
    pieces = []
    for name in names:
        value = text_value(r, state, blobs, name).encode("utf-8", "surrogatepass")
        mode = r.randrange(10)
        if mode < 5:
            pass  # raw, as the SDKs send it
        elif mode == 5:
            value = urllib.parse.quote_from_bytes(value).encode()
        elif mode == 6:
            value = value + b"\x00" if r.random() < 0.5 else b"%00" + value
        elif mode == 7:
            value = value + bytes([r.choice([0x80, 0xC0, 0xFF, 0xF5])]) + b"%C3%28%FF%"
        elif mode == 8:
            name = name + r.choice(["\u0000", "%00", "[]", "[0]", ".x", "%", "\u00e9"])
        else:
            pieces.append(name.encode())  # a bare key (the SDK's nil value)
            continue
        pieces.append(name.encode("utf-8", "surrogatepass") + b"=" + value)
        if r.random() < 0.05:
            pieces.append(name.encode() + b"=" + b"second")
    return b"&".join(pieces)


CONTENT_TYPES = [
    None, "application/json", "application/x-www-form-urlencoded", "application/json; charset=utf-8", "APPLICATION/JSON",
    "text/plain", "multipart/form-data; boundary=xyz", "application/jsonx", "application/x-www-form-urlencoded; charset=latin1",
    "", "*/*", "application/json\u00ff", "application/json;;;;", "json",
]


def path_for(r, name):
    if r.random() < 0.85:
        return "/api/appuser/" + name
    choice = r.randrange(16)
    if choice == 0:
        return "//api/appuser/" + name
    if choice == 1:
        return "/api/appuser/" + name + "/"
    if choice == 2:
        return "/API/AppUser/" + name.upper()
    if choice == 3:
        return "/api/appuser/" + "".join(c.upper() if r.random() < 0.5 else c.lower() for c in name)
    if choice == 4:
        return "/api/appuser/../appuser/" + name
    if choice == 5:
        return "/api/appuser/" + name + "/.."
    if choice == 6:
        return "/api/appuser/" + name + "%00"
    if choice == 7:
        return "/api/appuser/" + name[:-1] + "%" + format(ord(name[-1]), "02X")
    if choice == 8:
        return "/api/appuser/" + name + "/extra"
    if choice == 9:
        return "/api/appuser/" + name + "%zz%"
    if choice == 10:
        return "/api/appuser/" + name + ";jsessionid=1"
    if choice == 11:
        return "/api/appuser/" + name + "\u00e9"
    if choice == 12:
        return "/api/appuser/" + name + "/" * r.choice([2, 50])
    if choice == 13:
        return "/api///appuser////" + name + "//"
    if choice == 14:
        return "/api/appuser/" + name + "x" * r.choice([10, 300, 5000])
    return "/" * r.choice([2, 3, 100]) + "api/appuser/" + name


GARBAGE_PATHS = [
    "/api/appuser/", "/api/appuser", "/api/appuser//", "/api/appuser/%", "/api/appuser/%00", "/api/appuser/..",
    "/api/appuser/../../../etc/passwd", "/api/appuser/nope", "/api/appuser/login/login/login", "/api/appuser/\u00ff",
    "/api/appuser/?", "/api/appuser/#x", "*", "/", "//", "/api", "/api/appuser/%2e%2e/%2e%2e/admin/v1/apps",
    "/apps/x/.well-known/jwks.json", "/apps/%00/.well-known/jwks.json", "/api/appuser/logout", "/api/appuser/getapplication/",
]


class Request:
    __slots__ = ("index", "method", "target", "headers", "body", "raw")


def generate(i, seed, state, blobs, login_budget):
    r = random.Random(f"{seed}:{i}")
    req = Request()
    req.index = i
    if r.random() < APPKEY_SHARE:
        method, path, headers, body, content_type = appkey_fuzz.generate(r, state)
        if content_type:
            headers = headers + [("Content-Type", content_type)]
        req.method, req.target, req.headers, req.body = method, path.encode(), headers, body
        req.raw = encode(method, req.target, headers, body, r)
        return req
    roll = r.random()
    if roll < 0.04:
        name = None
        path = r.choice(GARBAGE_PATHS)
    else:
        name = ENDPOINTS[i % len(ENDPOINTS)] if r.random() < 0.7 else r.choice(ENDPOINTS)
        path = path_for(r, name)
    method = ("GET" if name in GET_ENDPOINTS and name != "completeSignup" else "POST") if name else "POST"
    if name == "completeSignup" and r.random() < 0.5:
        method = "GET"
    if r.random() < 0.08:
        method = r.choice(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "FOO", "CONNECT",
                           "PROPFIND", "post", "G\x00T", "GET POST"])
    # query string (GET routes read it; POST login reads appToken from it too)
    query = None
    if method == "GET" or r.random() < 0.1:
        params = []
        for key in r.sample(["userName", "appToken", "handle", "code", "x"], r.randrange(0, 5)):
            value = token_value(r, state, "app") if key == "appToken" else text_value(r, state, blobs, key)
            value_bytes = value.encode("utf-8", "surrogatepass")
            if len(value_bytes) > 6000:
                value_bytes = value_bytes[:6000]
            mode = r.randrange(5)
            if mode < 3:
                value_bytes = urllib.parse.quote_from_bytes(value_bytes, safe="").encode()
            elif mode == 3:
                value_bytes = value_bytes.replace(b"\x00", b"%00") + b"%00"
            else:
                value_bytes = urllib.parse.quote_from_bytes(value_bytes, safe="=&%").encode()
            params.append(key.encode() + b"=" + value_bytes)
        if r.random() < 0.05:
            params.append(b"%ff%fe=%c3%28&&=&%")
        query = b"&".join(params)
    target = path.encode("utf-8", "surrogatepass")
    target = urllib.parse.quote_from_bytes(target, safe="/%;?#*:@!$&'()+,=").encode() if r.random() < 0.9 else target
    if query is not None:
        target += b"?" + query
    headers = []
    # credentials
    cred = r.random()
    if cred < 0.45:
        headers.append(("app-token", token_value(r, state, "app")))
    elif cred < 0.85:
        headers.append(("access-token", token_value(r, state, "access")))
    elif cred < 0.92:
        headers.append(("app-token", token_value(r, state, "app")))
        headers.append(("access-token", token_value(r, state, "access")))
    elif cred < 0.96:
        headers.append((r.choice(["App-Token", "APP-TOKEN", "Access-Token", "app_token", "apptoken", "authorization"]),
                        token_value(r, state, r.choice(["app", "access"]))))
    # body
    body = None
    content_type = r.choice(CONTENT_TYPES)
    names = r.sample(FIELD_NAMES, r.randrange(0, 7))
    if name in ("login", "signup") and r.random() < 0.5:
        names = ["handle", "password"] + names
    if name == "loginComplete" and r.random() < 0.5:
        names = ["loginToken", "code"] + names
    if method not in ("GET", "HEAD") or r.random() < 0.05:
        size_roll = r.random()
        big = i % 5000  # a few bodies at the 1 MiB limit: 0.02 % just over it, 0.02 % just under, 0.02 % large JSON
        if big == 500:
            body = blobs.ascii[:BODY_LIMIT + r.choice([1, 100, 4096])]
        elif big == 2500:
            body = b"handle=" + blobs.ascii[:BODY_LIMIT - 7 - r.choice([0, 1, 10])]
        elif big == 4500:
            body = b'{"handle":"' + blobs.ascii[:r.choice([300_000, 900_000])] + b'"}'
        elif size_roll < 0.004:
            body = blobs.binary[:r.randrange(1, len(blobs.binary))]
        elif content_type and "json" in content_type.lower():
            body = json_body(r, state, blobs, names)
        elif r.random() < 0.15:
            body = json_body(r, state, blobs, names)
        else:
            body = form_body(r, state, blobs, names)
    # a login that would count a failure against the canary is limited (its lockout would fail the final check)
    if name == "login" and body is not None and state["canary"]["handle"].encode() in body:
        if login_budget[0] <= 0:
            body = body.replace(state["canary"]["handle"].encode(), b"someone-else@fuzz.test")
        else:
            login_budget[0] -= 1
    if content_type is not None:
        headers.append(("Content-Type", content_type))
        if r.random() < 0.05:
            headers.append(("Content-Type", r.choice(CONTENT_TYPES[1:4])))
    extra = r.random()
    if extra < 0.03:
        headers.append(("X-Junk", "\u00ff\u00fe" + "v" * r.choice([10, 4000, 70000 if r.random() < 0.1 else 100])))
    elif extra < 0.04:
        headers.append(("X-Forwarded-For", r.choice(["1.2.3.4", "::1, 10.0.0.1", "\u00ff", "x" * 300, ", ,", appkey_fuzz.mark_bomb(r, "", (40, 130, 1000))])))
    elif extra < 0.05:
        headers.append(("Expect", "100-continue"))
    elif extra < 0.06:
        headers.append(("Accept-Encoding", "gzip, deflate, br"))
    elif extra < 0.065:
        headers.append(("Content-Encoding", "gzip"))
    elif extra < 0.07:
        for k in range(r.choice([50, 90])):
            headers.append((f"X-H{k}", "v"))
    req.method = method
    req.target = target
    req.headers = headers
    req.body = body
    req.raw = encode(method, target, headers, body, r)
    return req


def chunked(r, body):
    """The body in chunked transfer coding; sometimes with extensions, trailers or a broken chunk size
    (always complete framing or an immediate parse error: nothing leaves the server waiting for bytes)."""
    out = []
    i = 0
    while i < len(body):
        size = r.choice([1, 7, 100, 4096, 70_000])
        piece = body[i:i + size]
        ext = r.choice([b"", b"", b";x=1", b";" + b"e" * 300])
        out.append(format(len(piece), r.choice(["x", "X", "04x"])).encode() + ext + b"\r\n" + piece + b"\r\n")
        i += size
    broken = r.random()
    if broken < 0.15:
        out.insert(r.randrange(len(out) + 1), r.choice([b"ZZ\r\n", b"-1\r\n", b"fffffffffffffffffff\r\n", b"\r\n", b"0x10\r\n"]))
        out.append(b"0\r\n\r\n")  # framing is already broken: the parser stops at the bad size
    else:
        out.append(b"0\r\n" + (b"X-Trailer: t\r\n" if broken < 0.3 else b"") + b"\r\n")
    return b"".join(out)


def encode(method, target, headers, body, r):
    lines = [method.encode("latin-1", "replace") + b" " + target + b" HTTP/1.1", b"Host: fuzz"]
    for key, value in headers:
        lines.append(key.encode() + b": " + value.encode("utf-8", "surrogatepass"))
    if body is not None and len(body) < 200_000 and r.random() < 0.03:
        framing = r.random()
        if framing < 0.6:
            lines.append(b"Transfer-Encoding: chunked")
            return b"\r\n".join(lines) + b"\r\n\r\n" + chunked(r, body)
        if framing < 0.7:  # both: refused by the parser (request smuggling shape)
            lines.append(b"Transfer-Encoding: chunked")
            lines.append(b"Content-Length: " + str(len(body)).encode())
            return b"\r\n".join(lines) + b"\r\n\r\n" + chunked(r, body)
        if framing < 0.8:  # two different Content-Lengths
            lines.append(b"Content-Length: " + str(len(body)).encode())
            lines.append(b"Content-Length: " + str(len(body) + 1).encode())
            return b"\r\n".join(lines) + b"\r\n\r\n" + body + b"x"
        if framing < 0.9:
            lines.append(b"Content-Length: " + r.choice([b"-1", b"1e3", b"0x10", b"99999999999999999999999", b"5 5"]))
            return b"\r\n".join(lines) + b"\r\n\r\n"
        lines.append(b"Transfer-Encoding: " + r.choice([b"gzip, chunked", b"identity", b"chunked, chunked", b"xchunked"]))
        lines.append(b"Content-Length: " + str(len(body)).encode())
        return b"\r\n".join(lines) + b"\r\n\r\n" + body
    if body is not None:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


# ---------------------------------------------------------------------------------------------------
# transport: raw keep-alive sockets, one request in flight per connection

class Dropped(Exception):
    pass


async def read_response(reader, method):
    head = await reader.readuntil(b"\r\n\r\n")
    while head.startswith(b"HTTP/1.1 1") and not head.startswith(b"HTTP/1.1 101"):  # 100 Continue: interim
        head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status_line = lines[0]
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise Dropped(f"bad status line {status_line[:100]!r}")
    status = int(parts[1])
    headers = {}
    for line in lines[1:]:
        if b":" in line:
            k, v = line.split(b":", 1)
            headers[k.strip().lower()] = v.strip()
    close = headers.get(b"connection", b"").lower() == b"close"
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return status, head, b"", close
    if method == "CONNECT" and b"content-length" not in headers and b"transfer-encoding" not in headers:
        # After CONNECT the connection is a tunnel (the HTTP parser stops): the head is the whole answer.
        return status, head, b"", True
    if b"content-length" in headers:
        body = await reader.readexactly(int(headers[b"content-length"]))
    elif headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        chunks = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                break
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(chunks)
    else:
        body = await reader.read()
        close = True
    return status, head, body, close


def describe(req, reply):
    head, _, body = req.raw.partition(b"\r\n\r\n")
    head = b" | ".join(line[:160] for line in head.split(b"\r\n"))
    return f"#{req.index} {head!r} body({len(body)} B)={body[:200]!r}\n      -> {reply}"


async def run(args, state, blobs):
    host, port = urllib.parse.urlsplit(args.base).hostname, urllib.parse.urlsplit(args.base).port
    indexes = args.only if args.only else list(range(args.requests))
    queue = asyncio.Queue()
    for i in indexes:
        queue.put_nowait(i)
    failures = []
    counts = {"sent": 0, "statuses": {}, "latency": {}, "retried": 0}
    login_budget = [300]
    stop = asyncio.Event()

    async def worker():
        reader = writer = None
        previous = None  # the request answered last on this connection (named in failures)
        while not stop.is_set():
            try:
                i = queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            req = generate(i, args.seed, state, blobs, login_budget)
            for attempt in (0, 1):
                if writer is None:
                    try:
                        reader, writer = await asyncio.open_connection(host, port, limit=4 * BODY_LIMIT)
                    except OSError as error:  # the server is gone: stop the run
                        failures.append(describe(req, f"cannot connect: {error} (previous on this connection: #{previous})"))
                        stop.set()
                        return
                    fresh = True
                else:
                    fresh = False
                sent_at = time.monotonic()
                try:
                    writer.write(req.raw)
                    try:
                        await writer.drain()
                    except (ConnectionResetError, BrokenPipeError):
                        pass  # the server may answer (413) and close before reading everything: read the answer
                    if hasattr(asyncio, "timeout"):  # Python 3.11+: no task per request
                        async with asyncio.timeout(args.timeout):
                            status, head, body, close = await read_response(reader, req.method)
                    else:
                        status, head, body, close = await asyncio.wait_for(read_response(reader, req.method), args.timeout)
                except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError, Dropped) as error:
                    writer.close()
                    writer = None
                    got = getattr(error, "partial", b"")
                    answered_before, previous = previous, None
                    if not fresh and attempt == 0 and not got:
                        counts["retried"] += 1  # a keep-alive connection closed after its previous answer?
                        continue
                    failures.append(describe(req, f"dropped connection ({type(error).__name__}: {error}; partial={got[:120]!r}; "
                                                  f"previous on this connection: #{answered_before})"))
                    break
                except asyncio.TimeoutError:
                    writer.close()
                    writer = None
                    failures.append(describe(req, f"no complete answer within {args.timeout} s (previous on this connection: #{previous})"))
                    previous = None
                    break
                counts["sent"] += 1
                if args.stats:
                    key = (req.target.split(b"?")[0][-30:].decode("latin-1"), status)
                    entry = counts["latency"].setdefault(key, [0, 0.0])
                    entry[0] += 1
                    entry[1] += time.monotonic() - sent_at
                counts["statuses"][status] = counts["statuses"].get(status, 0) + 1
                if status >= 500 or (b'"code":500' in body and INTERNAL in body):
                    failures.append(describe(req, f"HTTP {status} {body[:300]!r}"))
                previous = req.index
                if close:
                    writer.close()
                    writer = None
                    previous = None
                break
        if writer is not None:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(args.connections)))
    return failures, counts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True)
    parser.add_argument("--operator-token", required=True)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--connections", type=int, default=24)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--stats", action="store_true", help="print the slowest (path, status) groups")
    parser.add_argument("--only", type=int, nargs="*", help="replay only these request indexes")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = int(os.environ.get("FUZZ_SEED") or random.SystemRandom().randrange(1, 1_000_000))
    print(f"enduser fuzz: seed {args.seed} (replay: --seed {args.seed} [--only INDEX ...])", flush=True)
    try:
        state = setup(args.base.rstrip("/"), args.operator_token, args.seed)
    except (SetupError, OSError, ValueError) as error:
        print(f"enduser fuzz: set-up failed: {error}", file=sys.stderr)
        return 2
    blobs = Blobs()
    started = time.monotonic()
    failures, counts = asyncio.run(run(args, state, blobs))
    elapsed = time.monotonic() - started
    final = final_check(state)
    if final:
        failures.append(final)
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(counts["statuses"].items()))
    print(f"enduser fuzz: replies by status: {statuses}")
    if counts["retried"]:
        # After a complete answer the server closed the connection without announcing it (e.g. after a
        # broken chunked body); the next request, unread, was sent again on a new connection.
        print(f"enduser fuzz: {counts['retried']} request(s) resent: the server had closed the connection after its previous answer")
    if args.stats:
        groups = sorted(counts["latency"].items(), key=lambda kv: -kv[1][1])[:25]
        for (path, status), (n, total) in groups:
            print(f"  {total:7.1f} s total  {n:6d} x  {1000 * total / n:7.1f} ms  {status}  {path}")
    if failures:
        print(f"enduser fuzz: FAILURES ({len(failures)}; the first 40):", file=sys.stderr)
        for line in failures[:40]:
            print("  " + line, file=sys.stderr)
    print(f"enduser fuzz: {counts['sent']} requests in {elapsed:.1f} s, {len(failures)} failures (seed {args.seed})", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
