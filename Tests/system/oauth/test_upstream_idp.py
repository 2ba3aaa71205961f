"""An OpenID provider that nobody here wrote, upstream of the server (issue 22, item 8: Webcom's "OAuth2"
sign-in): idpyoidc's OP (the IdentityPython server library, from PyPI), served on 127.0.0.1 by this file
with the standard library's HTTP server. Its user is signed in without a form (idpyoidc's NoAuthn), so the
run needs no browser; everything else is idpyoidc's own: discovery, its JWKS, the authorization endpoint
with PKCE (S256 required), the token endpoint with client_secret_basic, and the ID tokens it signs.

Through the server's public APIs only:
- the app configures the provider with the admin API (its discovery URL, client id and secret);
- a native client's authorization request shows the hosted page, whose button for the provider starts the
  sign-in; idpyoidc answers the callback with a code; the server redeems it, checks the ID token and sends
  the browser on to the client with a code; that code gives an ID token of the app's issuer for a new
  account whose handle is the provider's verified e-mail, and an oidc identity;
- the callback's state works once;
- a native app's own ID token from idpyoidc (another client id there, listed in the provider's audiences)
  is exchanged at the token endpoint (RFC 8693, subject_token_type id_token) for the same account; a
  tampered one is refused.

Usage: run by run.sh (the OAUTH_* environment); alone: OAUTH_WORLD=... python test_upstream_idp.py [-k case].
"""
import base64
import hashlib
import json
import re
import secrets
import socket
import threading
import urllib.parse
from html import unescape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests
from idpyoidc.server import Server
from idpyoidc.server.oauth2.add_on.pkce import add_support
from idpyoidc.server.oidc.authorization import Authorization
from idpyoidc.server.oidc.provider_config import ProviderConfiguration
from idpyoidc.server.oidc.token import Token
from idpyoidc.server.user_authn.authn_context import INTERNETPROTOCOLPASSWORD

from harness import (ISSUER, TIMEOUT, Browser, admin, authorization_params, case, check, client, endpoint,
                     exchange_code, expect_json, expect_oauth_error, expect_status, run_cases, show, token_request,
                     verify_jwt, WORLD)

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
CALLBACK = ISSUER + "/oauth/upstream/callback"
NATIVE_REDIRECT = "http://127.0.0.1:1/native-callback"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class UpstreamOP:
    """idpyoidc's OP on 127.0.0.1, with two clients: the server's (`cosync`, redirect URI = the app's
    upstream callback) and a native app's (`native-app`), and one user."""

    def __init__(self):
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.email = f"upstream-{secrets.token_hex(4)}@idp.test"
        self.secrets = {"cosync": secrets.token_urlsafe(24), "native-app": secrets.token_urlsafe(24)}
        conf = {
            "issuer": self.issuer,
            "httpc_params": {"verify": False, "timeout": 5},
            "keys": {"uri_path": "jwks", "key_defs": [{"type": "RSA", "key": "", "use": ["sig"]}], "read_only": False},
            "endpoint": {
                "provider_config": {"path": ".well-known/openid-configuration", "class": ProviderConfiguration, "kwargs": {}},
                "authorization": {"path": "authorization", "class": Authorization, "kwargs": {}},
                "token": {"path": "token", "class": Token, "kwargs": {"client_authn_method": ["client_secret_basic"]}},
            },
            "authentication": {"anon": {"acr": INTERNETPROTOCOLPASSWORD, "class": "idpyoidc.server.user_authn.user.NoAuthn",
                                        "kwargs": {"user": "diana"}}},
            "userinfo": {"class": "idpyoidc.server.user_info.UserInfo",
                         "kwargs": {"db": {"diana": {"sub": "diana", "email": self.email, "email_verified": True, "name": "Diana"}}}},
            "claims_interface": {"class": "idpyoidc.server.session.claims.ClaimsInterface", "kwargs": {}},
            "add_on": {"pkce": {"function": add_support, "kwargs": {"essential": True}}},
            "session_params": {"encrypter": {"kwargs": {"keys": {"key_defs": [
                {"type": "OCT", "use": ["enc"], "kid": "password"}, {"type": "OCT", "use": ["enc"], "kid": "salt"}]}, "iterations": 1}}},
            "token_handler_args": {"code": {"lifetime": 600}, "token": {"lifetime": 600},
                                   "id_token": {"class": "idpyoidc.server.token.id_token.IDToken", "kwargs": {"add_claims_by_scope": True}}},
            "template_dir": "template",
        }
        self.server = Server(conf)
        for client_id, redirect in (("cosync", CALLBACK), ("native-app", NATIVE_REDIRECT)):
            self.server.context.cdb[client_id] = {
                "client_id": client_id, "client_secret": self.secrets[client_id], "redirect_uris": [(redirect, {})],
                "response_types_supported": ["code"], "token_endpoint_auth_method": "client_secret_basic",
                "allowed_scopes": ["openid", "email", "profile"],
            }
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), self.handler())
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def handler(self):
        op = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status, body=b"", kind="application/json", location=None):
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                with op.lock:
                    if url.path == "/.well-known/openid-configuration":
                        endpoint = op.server.get_endpoint("provider_config")
                        self.answer(200, endpoint.do_response(**endpoint.process_request())["response"].encode())
                    elif url.path == "/jwks":
                        self.answer(200, json.dumps(op.server.context.keyjar.export_jwks(issuer_id="")).encode())
                    elif url.path == "/authorization":
                        query = dict(urllib.parse.parse_qsl(url.query))
                        endpoint = op.server.get_endpoint("authorization")
                        request = endpoint.parse_request(query)
                        if "error" in request:
                            self.answer(400, json.dumps(request.to_dict()).encode())
                            return
                        response = endpoint.do_response(**endpoint.process_request(request))
                        self.answer(302, location=response["response"])
                    else:
                        self.answer(404)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
                if urllib.parse.urlsplit(self.path).path != "/token":
                    self.answer(404)
                    return
                with op.lock:
                    endpoint = op.server.get_endpoint("token")
                    request = endpoint.parse_request(dict(urllib.parse.parse_qsl(body)),
                                                     http_info={"headers": {"authorization": self.headers.get("Authorization", "")}})
                    if "error" in request:
                        self.answer(400, json.dumps(request.to_dict()).encode())
                        return
                    result = endpoint.process_request(request)
                    if "error" in result:
                        self.answer(400, json.dumps(result).encode())
                        return
                    self.answer(200, endpoint.do_response(**result)["response"].encode())

        return Handler

    def native_id_token(self):
        """What a native app does at the provider itself: an authorization code with PKCE, then the token
        endpoint; answers the ID token (audience: native-app)."""
        verifier = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        reply = requests.get(self.issuer + "/authorization", allow_redirects=False, timeout=TIMEOUT, params={
            "response_type": "code", "client_id": "native-app", "redirect_uri": NATIVE_REDIRECT, "scope": "openid email",
            "state": "s", "nonce": secrets.token_urlsafe(8), "code_challenge": challenge, "code_challenge_method": "S256"})
        expect_status(reply, 302, "idpyoidc authorization (native app)")
        code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(reply.headers["Location"]).query))["code"]
        pair = f"native-app:{self.secrets['native-app']}"
        tokens = expect_json(requests.post(self.issuer + "/token", timeout=TIMEOUT, headers={
            "Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}, data={
            "grant_type": "authorization_code", "code": code, "redirect_uri": NATIVE_REDIRECT, "code_verifier": verifier}),
            200, "idpyoidc token endpoint (native app)")
        return tokens["id_token"]


OP = UpstreamOP()
STATE = {}


def provider():
    """The app's provider for OP, configured once through the admin API."""
    if "provider" not in STATE:
        made = admin("POST", f"/apps/{WORLD['appId']}/oauth/upstream-providers", json={
            "name": "idpyoidc", "discoveryUrl": OP.issuer, "clientId": "cosync", "clientSecret": OP.secrets["cosync"],
            "scopes": ["openid", "email"], "audiences": ["native-app"]})
        body = expect_json(made, 201, "admin: add the upstream provider")
        check(body.get("issuer") == OP.issuer and body.get("redirectUri") == CALLBACK, f"provider as saved: {body}")
        check(body.get("hasClientSecret") is True and OP.secrets["cosync"] not in made.text, "the client secret is never answered")
        STATE["provider"] = body
    return STATE["provider"]


def through_upstream(browser, params, redirect):
    """From the authorization request to the client's code, signing in at OP: answers (callback URL at
    the server, the Callback the client got)."""
    provider_id = provider()["providerId"]
    reply = browser.http.get(endpoint("authorization_endpoint"), params=params, allow_redirects=False, timeout=TIMEOUT)
    expect_status(reply, 303, "authorization request")
    page = browser.http.get(urllib.parse.urljoin(reply.url, reply.headers["Location"]), allow_redirects=False, timeout=TIMEOUT)
    expect_status(page, 200, "hosted login page")
    buttons = [unescape(href) for href in re.findall(r'href="([^"]*)"', page.text) if f"/oauth/upstream/{provider_id}/start" in unescape(href)]
    check(len(buttons) == 1, f"the login page shows one button for the provider: {page.text[:2000]!r}")
    start = browser.http.get(urllib.parse.urljoin(page.url, buttons[0]), allow_redirects=False, timeout=TIMEOUT)
    expect_status(start, 303, "upstream start")
    at_op = start.headers["Location"]
    check(at_op.startswith(OP.issuer + "/authorization?"), f"start sends the browser to the provider: {at_op}")
    sent = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(at_op).query))
    check(sent.get("code_challenge_method") == "S256" and sent.get("nonce") and sent.get("state"), f"PKCE, nonce, state: {sent}")
    consent = requests.get(at_op, allow_redirects=False, timeout=TIMEOUT)
    expect_status(consent, 302, "idpyoidc authorization")
    back = consent.headers["Location"]
    check(back.startswith(CALLBACK + "?"), f"idpyoidc sends the browser back to the callback: {back}")
    reply = browser.http.get(back, allow_redirects=False, timeout=TIMEOUT)
    check(reply.status_code == 303, f"callback: expected 303 to the resume step, got {show(reply)}")
    return back, browser.follow(reply, redirect, None)


@case
def hosted_sign_in_through_idpyoidc():
    browser = Browser()
    params, verifier, redirect = authorization_params("native", scope="openid email")
    callback_url, callback = through_upstream(browser, params, redirect)
    check(callback.get("state") == params["state"] and callback.get("iss") == ISSUER, f"authorization response: {callback.url}")
    tokens = expect_json(exchange_code("native", callback["code"], redirect, verifier), 200, "code exchange")
    _, claims = verify_jwt(tokens["id_token"], "ID token")
    check(claims.get("nonce") == params["nonce"] and claims.get("iss") == ISSUER, f"ID token claims: {claims}")
    info = expect_json(requests.get(endpoint("userinfo_endpoint"), timeout=TIMEOUT,
                                    headers={"Authorization": f"Bearer {tokens['access_token']}"}), 200, "userinfo")
    check(info.get("email") == OP.email, f"the account's e-mail is the provider's verified one: {info}")
    user_id = claims["sub"]
    identities = expect_json(admin("GET", f"/apps/{WORLD['appId']}/users/{user_id}/identities"), 200, "identities")
    kinds = [(i.get("kind"), i.get("subject", "")) for i in identities.get("identities", [])]
    check(len(kinds) == 1 and kinds[0][0] == "oidc" and kinds[0][1].startswith(OP.issuer + "|"), f"one oidc identity: {kinds}")
    sessions = expect_json(admin("GET", f"/apps/{WORLD['appId']}/users/{user_id}/sessions"), 200, "sessions")
    check(any(s.get("method") == "oidc" for s in sessions.get("sessions", [])), f"an oidc session: {sessions}")
    STATE["user"] = user_id
    STATE["callback"] = (callback_url, browser)


@case
def callback_state_works_once():
    if "callback" not in STATE:
        hosted_sign_in_through_idpyoidc()
    url, browser = STATE["callback"]
    again = browser.http.get(url, allow_redirects=False, timeout=TIMEOUT)
    check(again.status_code == 400 and "Location" not in again.headers, f"the same callback again: {show(again)}")


@case
def second_sign_in_finds_the_same_account():
    if "user" not in STATE:
        hosted_sign_in_through_idpyoidc()
    params, verifier, redirect = authorization_params("native", scope="openid")
    _, callback = through_upstream(Browser(), params, redirect)
    tokens = expect_json(exchange_code("native", callback["code"], redirect, verifier), 200, "code exchange")
    _, claims = verify_jwt(tokens["id_token"], "ID token")
    check(claims["sub"] == STATE["user"], f"the same provider account signs in the same user: {claims['sub']} vs {STATE['user']}")


@case
def native_id_token_exchange():
    if "user" not in STATE:
        hosted_sign_in_through_idpyoidc()
    id_token = OP.native_id_token()
    reply = token_request({"grant_type": EXCHANGE, "client_id": client("native")["clientId"], "subject_token": id_token,
                           "subject_token_type": ID_TOKEN_TYPE, "scope": "openid email"})
    body = expect_json(reply, 200, "token exchange of idpyoidc's ID token")
    check(body.get("issued_token_type") == "urn:ietf:params:oauth:token-type:access_token", f"issued_token_type: {body}")
    _, claims = verify_jwt(body["access_token"], "access token", typ="at+jwt")
    check(claims.get("sub") == STATE["user"], f"the exchange signs in the same account: {claims.get('sub')} vs {STATE['user']}")
    # One payload byte changed: the signature no longer holds.
    head, payload, signature = id_token.split(".")
    tampered = payload[:-2] + ("A" if payload[-2] != "A" else "B") + payload[-1]
    refused = token_request({"grant_type": EXCHANGE, "client_id": client("native")["clientId"], "subject_token": f"{head}.{tampered}.{signature}",
                             "subject_token_type": ID_TOKEN_TYPE})
    expect_oauth_error(refused, "invalid_grant", "a tampered ID token")


if __name__ == "__main__":
    try:
        run_cases("upstream_idp")
    finally:
        # The shared app is left as it was found: later files see no provider button.
        if "provider" in STATE:
            admin("DELETE", f"/apps/{WORLD['appId']}/oauth/upstream-providers/{STATE['provider']['providerId']}")
        OP.httpd.shutdown()
