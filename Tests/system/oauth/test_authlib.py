"""Authlib (authlib.integrations.requests_client.OAuth2Session) as a native app would use it: the
authorization code flow with PKCE S256 through the hosted login page, refresh-token rotation with its grace
window and reuse detection, revocation (RFC 7009), and RFC 8693 token exchange from a legacy CosyncAuth
access-token. Clients "native" (public, grace 30 s) and "native_short_grace" (grace 1 s).

Run by Tests/system/oauth/run.sh; alone: OAUTH_WORLD=world.json python test_authlib.py [-k name]
"""
import json
import secrets
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import requests
from authlib.integrations.requests_client import OAuth2Session, OAuthError

from harness import (ISSUER, TIMEOUT, WORLD, Browser, admin, b64url_decode, case, check, client, endpoint,
                     expect_json, expect_oauth_error, expect_status, legacy_login, redirect_uri, run_cases,
                     token_request, user, verify_jwt)

SCOPE = "openid profile email offline_access"
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


def session(client_name="native", **kwargs):
    return OAuth2Session(client_id=client(client_name)["clientId"], redirect_uri=redirect_uri(client_name), scope=SCOPE,
                         code_challenge_method="S256", token_endpoint_auth_method="none",
                         revocation_endpoint_auth_method="none", timeout=TIMEOUT, **kwargs)


def authlib_sign_in(client_name="native", user_name="authlib"):
    """The whole code flow through Authlib: answers (OAuth2Session holding the token, the token, nonce)."""
    oauth = session(client_name)
    verifier = secrets.token_urlsafe(48)
    nonce = secrets.token_urlsafe(16)
    url, state = oauth.create_authorization_url(endpoint("authorization_endpoint"), code_verifier=verifier, nonce=nonce)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    check(query.get("code_challenge_method") == "S256" and query.get("code_challenge"), f"Authlib sent no S256 challenge: {url}")
    callback = _browse(url, oauth.redirect_uri, user_name)
    check(callback.get("state") == state, f"state {callback.get('state')!r} != Authlib's {state!r}")
    check(callback.get("iss") == ISSUER, f"iss {callback.get('iss')!r} != {ISSUER!r} (RFC 9207)")
    token = oauth.fetch_token(endpoint("token_endpoint"), authorization_response=callback.url, code_verifier=verifier,
                              state=state)
    return oauth, token, nonce


def _browse(url, redirect, user_name):
    browser = Browser()
    reply = browser.http.get(url, allow_redirects=False, timeout=TIMEOUT)
    return browser.follow(reply, redirect, user(user_name))


def access_claims(token, client_name="native", user_name="authlib"):
    """RFC 9068 access token: typ at+jwt, signed by the issuer's key, the contract's claims."""
    _, claims = verify_jwt(token, "access token", typ="at+jwt")
    now = time.time()
    check(claims.get("iss") == ISSUER, f"access token iss {claims.get('iss')!r}")
    check(claims.get("sub") == user(user_name)["userId"].lower(), f"access token sub {claims.get('sub')!r}")
    check(claims.get("client_id") == client(client_name)["clientId"], f"access token client_id {claims.get('client_id')!r}")
    aud = claims.get("aud")
    check(client(client_name)["clientId"] in (aud if isinstance(aud, list) else [aud]), f"access token aud {aud!r}")
    check(isinstance(claims.get("exp"), int) and claims["exp"] > now, f"access token exp {claims.get('exp')!r}")
    check(isinstance(claims.get("iat"), int) and claims["iat"] <= now + 60, f"access token iat {claims.get('iat')!r}")
    check(isinstance(claims.get("jti"), str) and claims["jti"], "access token without jti")
    check(isinstance(claims.get("sid"), str) and claims["sid"], "access token without sid (the session)")
    return claims


def check_bearer(token, what):
    check(str(token.get("token_type", "")).lower() == "bearer", f"{what}: token_type {token.get('token_type')!r}")
    check(isinstance(token.get("access_token"), str), f"{what}: no access_token")
    check(isinstance(token.get("expires_in"), int) and token["expires_in"] > 0, f"{what}: expires_in {token.get('expires_in')!r}")


def refresh_raw(client_name, refresh_token):
    return token_request({"grant_type": "refresh_token", "refresh_token": refresh_token,
                          "client_id": client(client_name)["clientId"]})


def userinfo(access_token):
    return requests.get(endpoint("userinfo_endpoint"), headers={"Authorization": f"Bearer {access_token}"}, timeout=TIMEOUT)


@case
def authlib_code_flow_pkce_s256():
    oauth, token, nonce = authlib_sign_in()
    check_bearer(token, "code exchange")
    check(isinstance(token.get("refresh_token"), str), f"no refresh_token (offline_access asked): {dict(token)}")
    check(set(str(token.get("scope", SCOPE)).split()) <= set(SCOPE.split()), f"scope {token.get('scope')!r}")
    claims = access_claims(token["access_token"])
    check("openid" in str(claims.get("scope", "")).split(), f"access token scope {claims.get('scope')!r}")
    _, id_claims = verify_jwt(token["id_token"], "id_token")
    check(id_claims.get("nonce") == nonce, f"id_token nonce {id_claims.get('nonce')!r} != {nonce!r}")
    check(id_claims.get("sid") == claims["sid"], "id_token and access token name different sessions")
    info = oauth.get(endpoint("userinfo_endpoint"))  # Authlib puts the bearer token on the request
    body = expect_json(info, 200, "userinfo through Authlib")
    check(body.get("sub") == claims["sub"], f"userinfo sub {body.get('sub')!r}")
    check(body.get("email") == user("authlib")["handle"], f"userinfo email {body.get('email')!r}")


@case
def authlib_refresh_rotation_and_grace():
    """Rotation: a new refresh token each time; the old one inside the grace window answers the same successor
    (a lost response or a race never logs the user out); the family lives on."""
    oauth, token, _ = authlib_sign_in()
    first_rt, first_at = token["refresh_token"], token["access_token"]
    refreshed = oauth.refresh_token(endpoint("token_endpoint"), refresh_token=first_rt)
    check_bearer(refreshed, "refresh")
    second_rt = refreshed.get("refresh_token")
    check(isinstance(second_rt, str) and second_rt != first_rt, "refresh: the refresh token was not rotated")
    check(refreshed["access_token"] != first_at, "refresh: the same access token again")
    first_claims, second_claims = access_claims(first_at), access_claims(refreshed["access_token"])
    check(first_claims["sid"] == second_claims["sid"], "refresh: the access token names another session")
    # the old token again, within the grace window: the same successor, a working access token
    retried = expect_json(refresh_raw("native", first_rt), 200, "refresh with the rotated token inside the grace window")
    check(retried.get("refresh_token") == second_rt,
          f"grace: expected the same successor, got {'another token' if retried.get('refresh_token') else 'none'}")
    expect_status(userinfo(retried["access_token"]), 200, "userinfo with the grace answer's access token")
    # the family lives on: the successor rotates normally
    third = oauth.refresh_token(endpoint("token_endpoint"), refresh_token=second_rt)
    check(third.get("refresh_token") not in (None, first_rt, second_rt), "refresh of the successor: not rotated")
    expect_status(userinfo(third["access_token"]), 200, "userinfo after the second rotation")


@case
def refresh_race_same_successor():
    """Ten refreshes of one token at once (a cold start with several callers): every one succeeds, all with the
    same successor, and the family lives on."""
    _, token, _ = authlib_sign_in()
    rt = token["refresh_token"]
    with ThreadPoolExecutor(max_workers=10) as pool:
        replies = list(pool.map(lambda _: refresh_raw("native", rt), range(10)))
    bodies = [expect_json(reply, 200, "concurrent refresh") for reply in replies]
    successors = {body.get("refresh_token") for body in bodies}
    check(len(successors) == 1 and None not in successors, f"concurrent refreshes: {len(successors)} different successors")
    successor = successors.pop()
    check(successor != rt, "concurrent refreshes: the token was not rotated")
    after = expect_json(refresh_raw("native", successor), 200, "refresh of the successor after the race")
    expect_status(userinfo(after["access_token"]), 200, "userinfo after the race")


@case
def authlib_refresh_reuse_after_grace_revokes_family():
    """A rotated refresh token presented after the grace window (1 s here) ends the whole family: its successor
    is dead and the session's access tokens are refused."""
    oauth, token, _ = authlib_sign_in("native_short_grace")
    first_rt = token["refresh_token"]
    refreshed = oauth.refresh_token(endpoint("token_endpoint"), refresh_token=first_rt)
    second_rt = refreshed["refresh_token"]
    sid = access_claims(refreshed["access_token"], "native_short_grace")["sid"]
    expect_status(userinfo(refreshed["access_token"]), 200, "userinfo before the reuse")
    time.sleep(2.5)
    expect_oauth_error(refresh_raw("native_short_grace", first_rt), "invalid_grant", "reuse of a rotated token after the grace window")
    expect_oauth_error(refresh_raw("native_short_grace", second_rt), "invalid_grant", "the successor after reuse detection")
    expect_status(userinfo(refreshed["access_token"]), 401, "userinfo with the family's access token after reuse detection")
    sessions = expect_json(admin("GET", f"/apps/{WORLD['appId']}/users/{user('authlib')['userId']}/sessions"), 200, "admin sessions")
    check(sid not in [s.get("sessionId") for s in sessions.get("sessions", [])], f"the session {sid} still lives after reuse detection")


@case
def authlib_revocation_rfc7009():
    """Revoking the refresh token (RFC 7009) ends it: a refresh with it then fails. An unknown token is
    answered 200 too (§2.2)."""
    oauth, token, _ = authlib_sign_in()
    reply = oauth.revoke_token(endpoint("revocation_endpoint"), token=token["refresh_token"], token_type_hint="refresh_token")
    expect_status(reply, 200, "revocation of the refresh token")
    expect_oauth_error(refresh_raw("native", token["refresh_token"]), "invalid_grant", "refresh after revocation")
    try:
        oauth.refresh_token(endpoint("token_endpoint"), refresh_token=token["refresh_token"])
    except OAuthError as error:
        check(error.error == "invalid_grant", f"Authlib refresh after revocation: {error.error}")
    else:
        raise AssertionError("Authlib refresh after revocation succeeded")
    reply = oauth.revoke_token(endpoint("revocation_endpoint"), token="no-such-token-" + secrets.token_hex(8))
    expect_status(reply, 200, "revocation of an unknown token")


def backend(scope="api:read"):
    c = client("backend")
    return OAuth2Session(client_id=c["clientId"], client_secret=c["clientSecret"], scope=scope,
                         token_endpoint_auth_method="client_secret_basic", timeout=TIMEOUT)


@case
def authlib_client_credentials():
    """An app backend's own token (RFC 6749 §4.4): an RFC 9068 JWT naming the client, no user, no session, no
    refresh token; user scopes (openid) are not for it."""
    oauth = backend()
    token = oauth.fetch_token(endpoint("token_endpoint"), grant_type="client_credentials")
    check_bearer(token, "client_credentials")
    check("refresh_token" not in token, "client_credentials: a refresh token was issued (RFC 6749 §4.4.3)")
    _, claims = verify_jwt(token["access_token"], "client_credentials access token", typ="at+jwt")
    cid = client("backend")["clientId"]
    check(claims.get("client_id") == cid and claims.get("sub") == cid, f"client_credentials: client_id/sub {claims.get('client_id')!r}/{claims.get('sub')!r}")
    check("sid" not in claims, f"client_credentials: a session in the token: {claims.get('sid')!r}")
    check(claims.get("scope") == "api:read", f"client_credentials: scope {claims.get('scope')!r}")
    try:
        backend("openid api:read").fetch_token(endpoint("token_endpoint"), grant_type="client_credentials")
    except OAuthError as error:
        check(error.error == "invalid_scope", f"client_credentials with openid: {error.error}")
    else:
        raise AssertionError("client_credentials with the openid scope was granted")
    # a public client cannot use it
    reply = token_request({"grant_type": "client_credentials", "client_id": client("native")["clientId"]})
    expect_oauth_error(reply, ("unauthorized_client", "invalid_client"), "client_credentials by a public client")


@case
def authlib_introspection_rfc7662():
    """The backend introspects a user's tokens (RFC 7662): active with sub, client_id and scope while live,
    inactive after revocation; a public client may not introspect."""
    user_session, token, _ = authlib_sign_in()
    oauth = backend()
    url = endpoint("introspection_endpoint")
    answer = expect_json(oauth.introspect_token(url, token=token["access_token"], token_type_hint="access_token"), 200,
                         "introspection of an access token")
    check(answer.get("active") is True, f"introspection: {answer}")
    check(answer.get("sub") == user("authlib")["userId"].lower() and answer.get("client_id") == client("native")["clientId"],
          f"introspection: sub/client_id {answer.get('sub')!r}/{answer.get('client_id')!r}")
    check("openid" in str(answer.get("scope", "")).split(), f"introspection: scope {answer.get('scope')!r}")
    answer = expect_json(oauth.introspect_token(url, token=token["refresh_token"], token_type_hint="refresh_token"), 200,
                         "introspection of a refresh token")
    check(answer.get("active") is True and answer.get("sub") == user("authlib")["userId"].lower(), f"introspection (refresh): {answer}")
    answer = expect_json(oauth.introspect_token(url, token="garbage-" + secrets.token_hex(8)), 200, "introspection of garbage")
    check(answer == {"active": False}, f"introspection of garbage: {answer}")
    public = requests.post(url, data={"token": token["access_token"], "client_id": client("native")["clientId"]}, timeout=TIMEOUT)
    expect_oauth_error(public, "invalid_client", "introspection by a public client", status=401)
    expect_status(user_session.revoke_token(endpoint("revocation_endpoint"), token=token["refresh_token"],
                                            token_type_hint="refresh_token"), 200, "revocation")
    for kind in ("access_token", "refresh_token"):
        answer = expect_json(oauth.introspect_token(url, token=token[kind], token_type_hint=kind), 200, f"introspection after revocation ({kind})")
        check(answer.get("active") is False, f"introspection after revocation: the {kind} is still active: {answer}")


def legacy_sid(access_token):
    parts = access_token.split(".")
    check(len(parts) == 3, f"the legacy access-token is not a JWT: {access_token[:40]}…")
    return json.loads(b64url_decode(parts[1])).get("sid")


@case
def authlib_token_exchange_from_legacy_token():
    """RFC 8693: an app on the Cosync SDKs trades its access-token (POST /api/appuser/login, MD5 password) for an
    OAuth token set without a new login; the set is tied to the legacy session, so ending that session ends it."""
    legacy = legacy_login("exchange")["access-token"]
    sid = legacy_sid(legacy)
    oauth = session()
    token = oauth.fetch_token(endpoint("token_endpoint"), grant_type=EXCHANGE, subject_token=legacy,
                              subject_token_type=ACCESS_TOKEN_TYPE)
    check_bearer(token, "token exchange")
    check(token.get("issued_token_type") == ACCESS_TOKEN_TYPE, f"issued_token_type {token.get('issued_token_type')!r} (RFC 8693 §2.2.1)")
    claims = access_claims(token["access_token"], user_name="exchange")
    check(claims["sid"] == sid, f"exchange: access token sid {claims['sid']} != the legacy session {sid}")
    check(isinstance(token.get("refresh_token"), str), f"exchange: no refresh_token: {dict(token)}")
    refreshed = expect_json(refresh_raw("native", token["refresh_token"]), 200, "refresh of the exchanged token set")
    expect_status(userinfo(refreshed["access_token"]), 200, "userinfo with the exchanged set")
    # garbage and a wrong subject_token_type are refused
    bad = token_request({"grant_type": EXCHANGE, "client_id": client("native")["clientId"],
                         "subject_token": legacy[:-4] + "AAAA", "subject_token_type": ACCESS_TOKEN_TYPE})
    expect_oauth_error(bad, ("invalid_grant", "invalid_request"), "exchange of a forged legacy token")
    # ending the legacy session ends the OAuth tokens
    reply = admin("DELETE", f"/apps/{WORLD['appId']}/users/{user('exchange')['userId']}/sessions/{sid}")
    check(reply.status_code in (200, 204), f"admin: ending the legacy session: {reply.status_code} {reply.text[:200]}")
    expect_status(userinfo(refreshed["access_token"]), 401, "userinfo after the legacy session ended")
    expect_oauth_error(refresh_raw("native", refreshed["refresh_token"]), "invalid_grant", "refresh after the legacy session ended")


if __name__ == "__main__":
    run_cases("authlib")
