"""What the OAuth system tests share: the world setup.py made, a tiny test runner, a browser that signs in
on the hosted login page (requests + html.parser: GET the page, fill its form, POST it, follow the
redirects until the one to the client's redirect URI, which nobody listens on: its Location is the
answer), PKCE, and JWT checks against the issuer's JWKS (jwcrypto).

Every check raises AssertionError with what was expected and what came, so a failure names itself.
"""
import base64
import hashlib
import json
import os
import random
import secrets
import sys
import time
import traceback
import urllib.parse
from html.parser import HTMLParser

import requests
from jwcrypto import jwk, jws

with open(os.environ["OAUTH_WORLD"]) as _world:
    WORLD = json.load(_world)
BASE = WORLD["base"]
ISSUER = WORLD["issuer"]
TIMEOUT = 30
USER_AGENT = "CosyncAuth-oauth-system-test/1 (python-requests)"


# --- the runner ----------------------------------------------------------------------------------------
CASES = []


def case(fn):
    """Registers a test case; its name is the function's name."""
    CASES.append(fn)
    return fn


def run_cases(title):
    """Runs every case (or those whose name contains the -k argument), prints PASS/FAIL lines and a
    summary, and exits 1 when any failed."""
    want = None
    if "-k" in sys.argv:
        want = sys.argv[sys.argv.index("-k") + 1]
    passed, failed = [], []
    for fn in CASES:
        if want and want not in fn.__name__:
            continue
        start = time.monotonic()
        try:
            fn()
        except Exception as error:  # noqa: BLE001 (every failure is reported, then the next case runs)
            failed.append(fn.__name__)
            kind = "" if isinstance(error, AssertionError) else f"{type(error).__name__}: "
            print(f"FAIL {title}.{fn.__name__} ({time.monotonic() - start:.1f} s)\n     {kind}{error}", flush=True)
            frames = traceback.extract_tb(error.__traceback__)
            ours = [f for f in frames if "/oauth/" in f.filename]
            for frame in (ours or frames)[-4:]:
                print(f"     at {os.path.basename(frame.filename)}:{frame.lineno} {frame.line}", flush=True)
        else:
            passed.append(fn.__name__)
            print(f"PASS {title}.{fn.__name__} ({time.monotonic() - start:.1f} s)", flush=True)
    print(f"{title}: {len(passed)} passed, {len(failed)} failed" + (f": {', '.join(failed)}" if failed else ""),
          flush=True)
    sys.exit(1 if failed or not passed else 0)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def show(reply):
    """One line about an HTTP answer for failure messages."""
    body = reply.text
    if len(body) > 600:
        body = body[:600] + "…"
    return f"HTTP {reply.status_code} {reply.request.method} {reply.url}: {body!r}"


def expect_status(reply, status, what):
    check(reply.status_code == status, f"{what}: expected HTTP {status}, got {show(reply)}")
    return reply


def expect_json(reply, status, what):
    expect_status(reply, status, what)
    try:
        body = reply.json()
    except ValueError:
        raise AssertionError(f"{what}: not JSON: {show(reply)}") from None
    check(isinstance(body, dict), f"{what}: not a JSON object: {show(reply)}")
    return body


def expect_oauth_error(reply, codes, what, status=None):
    """An RFC 6749 §5.2 error: HTTP 400 (401 for invalid_client), JSON with `error` in `codes`."""
    codes = (codes,) if isinstance(codes, str) else tuple(codes)
    check(reply.status_code in ((status,) if status else (400, 401)), f"{what}: expected an error status, got {show(reply)}")
    try:
        body = reply.json()
    except ValueError:
        raise AssertionError(f"{what}: error answer is not JSON: {show(reply)}") from None
    check(body.get("error") in codes, f"{what}: expected error {' or '.join(codes)}, got {show(reply)}")
    return body


# --- the issuer ----------------------------------------------------------------------------------------
_discovery = {}


def discovery():
    if not _discovery:
        reply = requests.get(ISSUER + "/.well-known/openid-configuration", timeout=TIMEOUT)
        _discovery.update(expect_json(reply, 200, "discovery"))
    return _discovery


def endpoint(name):
    value = discovery().get(name)
    check(isinstance(value, str) and value.startswith(BASE), f"discovery: {name} is {value!r}")
    return value


def jwks():
    reply = requests.get(endpoint("jwks_uri"), timeout=TIMEOUT)
    return expect_json(reply, 200, "jwks_uri")


def verify_jwt(token, what, typ=None):
    """Verifies a compact JWS with the issuer's JWKS (RS256, by `kid`); answers (header, claims)."""
    check(isinstance(token, str) and token.count(".") == 2, f"{what}: not a compact JWT: {token!r}")
    header = json.loads(b64url_decode(token.split(".")[0]))
    check(header.get("alg") == "RS256", f"{what}: alg is {header.get('alg')!r}, expected RS256")
    check(isinstance(header.get("kid"), str), f"{what}: no kid in the header {header}")
    if typ is not None:
        check(str(header.get("typ", "")).lower() in (typ, "application/" + typ),
              f"{what}: typ is {header.get('typ')!r}, expected {typ}")
    keys = [k for k in jwks().get("keys", []) if k.get("kid") == header["kid"]]
    check(len(keys) == 1, f"{what}: kid {header['kid']!r} is not (once) in the JWKS")
    verifier = jws.JWS()
    verifier.deserialize(token)
    try:
        verifier.verify(jwk.JWK(**keys[0]), alg="RS256")
    except jws.InvalidJWSSignature:
        raise AssertionError(f"{what}: the signature does not verify with the JWKS key {header['kid']}") from None
    return header, json.loads(verifier.payload)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def half_hash(value):
    """at_hash / c_hash for RS256 (OIDC Core §3.1.3.6)."""
    return b64url(hashlib.sha256(value.encode()).digest()[:16])


def pkce():
    """(verifier, S256 challenge)."""
    verifier = b64url(secrets.token_bytes(48))
    return verifier, b64url(hashlib.sha256(verifier.encode()).digest())


def client(name):
    return WORLD["clients"][name]


def user(name):
    return WORLD["users"][name]


def redirect_uri(client_name):
    """The client's first redirect URI; a loopback one gets a port nobody listens on (RFC 8252 §7.3)."""
    uri = client(client_name)["redirectURIs"][0]
    parts = urllib.parse.urlsplit(uri)
    if parts.hostname == "127.0.0.1" and parts.port is None:
        uri = urllib.parse.urlunsplit(parts._replace(netloc=f"127.0.0.1:{random.randrange(20000, 60000)}"))
    return uri


def basic_auth(client_name):
    """client_secret_basic (RFC 6749 §2.3.1: both parts form-encoded first)."""
    c = client(client_name)
    pair = f"{urllib.parse.quote(c['clientId'], safe='')}:{urllib.parse.quote(c['clientSecret'], safe='')}"
    return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}


def token_request(data, headers=None):
    return requests.post(endpoint("token_endpoint"), data=data, headers=headers or {}, timeout=TIMEOUT)


def legacy_login(user_name):
    """The end-user API's login (what the Cosync SDKs do): the password as MD5 hex; answers its JSON."""
    u = user(user_name)
    reply = requests.post(BASE + "/api/appuser/login", headers={"app-token": WORLD["appToken"]}, timeout=TIMEOUT,
                          data={"handle": u["handle"], "password": hashlib.md5(u["password"].encode()).hexdigest()})
    body = expect_json(reply, 200, "legacy login (POST /api/appuser/login)")
    check(isinstance(body.get("access-token"), str), f"legacy login: no access-token in {body}")
    return body


def admin(method, path, **kwargs):
    return requests.request(method, BASE + "/admin/v1" + path, timeout=TIMEOUT,
                            headers={"Authorization": f"Bearer {WORLD['operatorToken']}"}, **kwargs)


# --- the browser ---------------------------------------------------------------------------------------
class _Forms(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.forms = []
        self.current = None
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = {k: (v if v is not None else "") for k, v in attrs}
        if tag == "form":
            self.current = {"action": a.get("action", ""), "method": a.get("method", "get").upper(), "inputs": [],
                            "buttons": []}
            self.forms.append(self.current)
        elif tag == "input" and self.current is not None:
            self.current["inputs"].append(a)
        elif tag == "button" and self.current is not None:
            self.current["buttons"].append(a)

    def handle_endtag(self, tag):
        if tag == "form":
            self.current = None

    def handle_data(self, data):
        if data.strip():
            self.text.append(data.strip())


def page_forms(html):
    """Every form of a page: action, method, inputs and buttons (their attributes)."""
    parser = _Forms()
    parser.feed(html)
    return parser.forms


HANDLE_NAMES = ("handle", "email", "username", "user", "login", "login_hint", "identifier")


def login_form(html):
    """The sign-in form of a page (the one with a password field, else one asking for the handle), and the page's text."""
    parser = _Forms()
    parser.feed(html)
    text = " ".join(parser.text)[:400]
    with_password = [f for f in parser.forms if any(i.get("type", "").lower() == "password" for i in f["inputs"])]
    if with_password:
        return with_password[0], text
    with_handle = [f for f in parser.forms
                   if any(i.get("type", "text").lower() in ("text", "email") and i.get("name", "").lower() in HANDLE_NAMES
                          for i in f["inputs"])]
    return (with_handle[0] if with_handle else None), text


def _fill(form, who):
    fields = []
    for i in form["inputs"]:
        name, kind = i.get("name"), i.get("type", "text").lower()
        if not name:
            continue
        if kind == "password":
            fields.append((name, who["password"]))
        elif kind in ("text", "email") and (name.lower() in HANDLE_NAMES or not i.get("value")):
            fields.append((name, who["handle"]))
        elif kind in ("checkbox", "radio"):
            if "checked" in i:
                fields.append((name, i.get("value", "on")))
        elif kind in ("submit", "image", "button", "file", "reset"):
            continue
        else:
            fields.append((name, i.get("value", "")))
    # the submit control a user would press: the form's first named one
    submits = [b for b in form["buttons"] if b.get("type", "submit").lower() == "submit"]
    submits += [i for i in form["inputs"] if i.get("type", "").lower() == "submit"]
    if submits and submits[0].get("name"):
        fields.append((submits[0]["name"], submits[0].get("value", "")))
    return fields


def same_endpoint(url, redirect):
    a, b = urllib.parse.urlsplit(url), urllib.parse.urlsplit(redirect)
    return (a.scheme, a.netloc, a.path) == (b.scheme, b.netloc, b.path)


class Callback:
    """The authorization response as it reached the redirect URI."""

    def __init__(self, url, logins):
        self.url = url
        self.logins = logins  # how many login forms were submitted on the way
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query, keep_blank_values=True)
        for key, values in query.items():
            check(len(values) == 1, f"authorization response: {key} appears {len(values)} times in {url}")
        self.params = {k: v[0] for k, v in query.items()}

    def __getitem__(self, key):
        return self.params[key]

    def get(self, key):
        return self.params.get(key)


class Browser:
    """A cookie jar and the hosted login page, driven like a person at a browser without JavaScript."""

    def __init__(self):
        self.http = requests.Session()
        self.http.headers["User-Agent"] = USER_AGENT
        self.origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(BASE))

    def authorize(self, params, redirect, who=None, method="GET"):
        """Sends the authorization request (GET query or POST form), signs in as `who` (a world user) when
        the login page asks, and answers the Callback that reached `redirect`. With who=None a login page
        is a failure (prompt=none, single sign-on)."""
        url = endpoint("authorization_endpoint")
        if method == "GET":
            reply = self.http.get(url, params=params, allow_redirects=False, timeout=TIMEOUT)
        else:
            reply = self.http.post(url, data=params, allow_redirects=False, timeout=TIMEOUT,
                                   headers={"Origin": self.origin})
        return self.follow(reply, redirect, who)

    def follow(self, reply, redirect, who):
        logins = 0
        for _ in range(25):
            if reply.is_redirect:
                location = urllib.parse.urljoin(reply.url, reply.headers["Location"])
                if same_endpoint(location, redirect):
                    return Callback(location, logins)
                check(location.startswith(BASE + "/"),
                      f"authorization: redirected to {location}, neither the server nor the redirect URI {redirect}")
                reply = self.http.get(location, allow_redirects=False, timeout=TIMEOUT)
                continue
            kind = reply.headers.get("Content-Type", "")
            if reply.status_code == 200 and "html" in kind:
                form, text = login_form(reply.text)
                check(form is not None, f"authorization: a page without a login form at {reply.url}: {text!r}")
                check(who is not None, f"authorization: the login page was shown where none was expected ({reply.url}): {text!r}")
                check(logins < 3, f"authorization: the login page keeps coming back (refused?): {text!r}")
                logins += 1
                action = urllib.parse.urljoin(reply.url, form["action"] or reply.url)
                fields = _fill(form, who)
                if form["method"] == "POST":
                    reply = self.http.post(action, data=fields, allow_redirects=False, timeout=TIMEOUT,
                                           headers={"Origin": self.origin, "Referer": reply.url})
                else:
                    reply = self.http.get(action, params=fields, allow_redirects=False, timeout=TIMEOUT)
                continue
            raise AssertionError(f"authorization: unexpected answer {show(reply)}")
        raise AssertionError("authorization: more than 25 steps")


def authorization_params(client_name, scope="openid profile email offline_access", nonce=True, **extra):
    """A complete, valid authorization request: answers (params, verifier, redirect_uri). nonce: True (a
    random one), False (none) or the nonce to send."""
    verifier, challenge = pkce()
    redirect = redirect_uri(client_name)
    params = {"response_type": "code", "client_id": client(client_name)["clientId"], "redirect_uri": redirect,
              "scope": scope, "state": secrets.token_urlsafe(16), "code_challenge": challenge,
              "code_challenge_method": "S256"}
    if nonce:
        params["nonce"] = nonce if isinstance(nonce, str) else secrets.token_urlsafe(16)
    params.update(extra)
    return {k: v for k, v in params.items() if v is not None}, verifier, redirect


def sign_in(client_name, user_name, browser=None, **extra):
    """One authorization-code round trip up to the code: answers (callback, params, verifier, redirect, browser)."""
    browser = browser or Browser()
    params, verifier, redirect = authorization_params(client_name, **extra)
    callback = browser.authorize(params, redirect, who=user(user_name))
    check("code" in callback.params, f"authorization: no code in the response {callback.url}")
    return callback, params, verifier, redirect, browser


def exchange_code(client_name, code, redirect, verifier):
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect, "code_verifier": verifier}
    c = client(client_name)
    headers = {}
    if c["authMethod"] == "client_secret_basic":
        headers = basic_auth(client_name)
    elif c["authMethod"] == "client_secret_post":
        data.update(client_id=c["clientId"], client_secret=c["clientSecret"])
    else:
        data["client_id"] = c["clientId"]
    return token_request(data, headers)


def tokens_for(client_name, user_name, **extra):
    """Signs in and exchanges the code: answers (token JSON, authorization params, callback)."""
    callback, params, verifier, redirect, _ = sign_in(client_name, user_name, **extra)
    body = expect_json(exchange_code(client_name, callback["code"], redirect, verifier), 200, "code exchange")
    return body, params, callback
