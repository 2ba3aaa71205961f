"""The OpenID Foundation's Basic OP certification plan (oidcc-basic-certification-test-plan), the checks that
apply to a code-flow provider with PKCE, ported as named black-box tests (the conformance suite itself cannot
run here). Each case names the plan's module it stands for. Client "web" (client_secret_basic), user "basic".

Run by Tests/system/oauth/run.sh; alone: OAUTH_WORLD=world.json python test_basic_op.py [-k name]
"""
import base64
import secrets
import time
import urllib.parse

import requests

from harness import (BASE, ISSUER, TIMEOUT, WORLD, Browser, admin, login_form, page_forms as _page_forms, same_endpoint, show, authorization_params, basic_auth, case, check, client,
                     discovery, endpoint, exchange_code, expect_json, expect_oauth_error, expect_status, half_hash,
                     jwks, pkce, run_cases, sign_in, token_request, tokens_for, user, verify_jwt)

WEB = "web"
WHO = "basic"


def id_token_claims(body, params, what="id_token"):
    """Checks the ID token of a token response as OIDC Core §3.1.3.7 says a client must; answers its claims."""
    check(isinstance(body.get("id_token"), str), f"{what}: no id_token in the token response {body}")
    _, claims = verify_jwt(body["id_token"], what)
    now = time.time()
    check(claims.get("iss") == ISSUER, f"{what}: iss {claims.get('iss')!r} != issuer {ISSUER!r}")
    check(isinstance(claims.get("sub"), str) and claims["sub"], f"{what}: no sub")
    aud = claims.get("aud")
    auds = aud if isinstance(aud, list) else [aud]
    check(params["client_id"] in auds, f"{what}: aud {aud!r} does not hold the client id {params['client_id']}")
    if isinstance(aud, list) and len(aud) > 1:
        check(claims.get("azp") == params["client_id"], f"{what}: several audiences and azp {claims.get('azp')!r}")
    check(isinstance(claims.get("exp"), int) and claims["exp"] > now, f"{what}: exp {claims.get('exp')!r} not in the future")
    check(isinstance(claims.get("iat"), int) and now - 300 < claims["iat"] <= now + 60, f"{what}: iat {claims.get('iat')!r} not now")
    if "nonce" in params:
        check(claims.get("nonce") == params["nonce"], f"{what}: nonce {claims.get('nonce')!r} != sent {params['nonce']!r}")
    if "at_hash" in claims and "access_token" in body:
        check(claims["at_hash"] == half_hash(body["access_token"]), f"{what}: at_hash does not match the access token")
    return claims


# --- discovery ---------------------------------------------------------------------------------------------
@case
def oidcc_discovery_issuer_matches():
    """oidcc-discovery-issuer-not-matching-config: the document's issuer is the URL it was fetched under."""
    check(discovery().get("issuer") == ISSUER, f"issuer {discovery().get('issuer')!r} != {ISSUER!r}")
    rfc8414 = expect_json(requests.get(ISSUER + "/.well-known/oauth-authorization-server", timeout=TIMEOUT), 200,
                          "RFC 8414 metadata")
    check(rfc8414.get("issuer") == ISSUER, f"RFC 8414 issuer {rfc8414.get('issuer')!r}")
    app_path = urllib.parse.urlsplit(ISSUER).path
    inserted = expect_json(requests.get(f"{BASE}/.well-known/oauth-authorization-server{app_path}", timeout=TIMEOUT),
                           200, "RFC 8414 §3 path-inserted metadata")
    check(inserted.get("issuer") == ISSUER, f"path-inserted metadata issuer {inserted.get('issuer')!r}")


@case
def oidcc_discovery_required_fields():
    """OpenID Connect Discovery §3 REQUIRED fields (and the RECOMMENDED userinfo endpoint), with values a
    code-flow client can use."""
    d = discovery()
    for field in ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri", "response_types_supported",
                  "subject_types_supported", "id_token_signing_alg_values_supported", "userinfo_endpoint"):
        check(field in d, f"discovery: {field} missing")
    for field in ("authorization_endpoint", "token_endpoint", "jwks_uri", "userinfo_endpoint"):
        check(d[field].startswith(ISSUER + "/"), f"discovery: {field} {d[field]!r} not under the issuer")
    check("code" in d["response_types_supported"], f"response_types_supported {d['response_types_supported']}")
    check("RS256" in d["id_token_signing_alg_values_supported"], "id_token_signing_alg_values_supported lacks RS256")
    check("openid" in d.get("scopes_supported", []), f"scopes_supported {d.get('scopes_supported')}")
    check(d.get("code_challenge_methods_supported") == ["S256"],
          f"code_challenge_methods_supported {d.get('code_challenge_methods_supported')} (S256 only)")
    check(d.get("authorization_response_iss_parameter_supported") is True, "RFC 9207 flag missing")


@case
def oidcc_discovery_jwks_reachable():
    """The jwks_uri answers a JWKS of public RSA signing keys, each with a kid."""
    keys = jwks().get("keys")
    check(isinstance(keys, list) and keys, f"jwks: no keys: {keys!r}")
    for key in keys:
        check(key.get("kty") == "RSA" and key.get("n") and key.get("e"), f"jwks: not an RSA public key: {key}")
        check(isinstance(key.get("kid"), str) and key["kid"], f"jwks: key without kid: {key}")
        check(key.get("use", "sig") == "sig", f"jwks: key use {key.get('use')!r}")
        for private in ("d", "p", "q", "dp", "dq", "qi"):
            check(private not in key, f"jwks: the private member {private} is published")


# --- the code flow and the ID token ----------------------------------------------------------------------
@case
def oidcc_server_id_token_claims():
    """oidcc-server: a plain code flow; the ID token's iss, sub, aud, exp, iat, nonce, signature (jwks_uri),
    at_hash; the token response's shape and headers (OIDC Core §3.1.3.3: no-store)."""
    callback, params, verifier, redirect, _ = sign_in(WEB, WHO)
    reply = exchange_code(WEB, callback["code"], redirect, verifier)
    body = expect_json(reply, 200, "code exchange")
    check("no-store" in reply.headers.get("Cache-Control", ""), f"token response Cache-Control {reply.headers.get('Cache-Control')!r}")
    check(str(body.get("token_type", "")).lower() == "bearer", f"token_type {body.get('token_type')!r}")
    check(isinstance(body.get("expires_in"), int) and body["expires_in"] > 0, f"expires_in {body.get('expires_in')!r}")
    claims = id_token_claims(body, params)
    check(claims["sub"] == user(WHO)["userId"].lower(), f"sub {claims['sub']!r} != the user's id {user(WHO)['userId']}")
    check("auth_time" in claims and isinstance(claims["auth_time"], int), f"auth_time {claims.get('auth_time')!r}")
    check(claims["auth_time"] <= time.time() + 5, "auth_time in the future")


@case
def oidcc_ensure_request_without_nonce_succeeds_for_code_flow():
    """A code flow without nonce works, and the ID token then has no nonce."""
    body, params, _ = tokens_for(WEB, WHO, nonce=False)
    claims = id_token_claims(body, params)
    check("nonce" not in claims, f"nonce {claims.get('nonce')!r} in an ID token nobody asked a nonce for")


@case
def oidcc_nonce_echoed():
    """The nonce sent is the nonce in the ID token, exactly (two different nonces, two ID tokens)."""
    first, p1, _ = tokens_for(WEB, WHO, nonce="n-" + secrets.token_urlsafe(20))
    second, p2, _ = tokens_for(WEB, WHO, nonce="n-" + secrets.token_urlsafe(20))
    check(id_token_claims(first, p1)["nonce"] == p1["nonce"], "first nonce")
    check(id_token_claims(second, p2)["nonce"] == p2["nonce"], "second nonce")


@case
def oidcc_max_age_auth_time():
    """oidcc-max-age-1 / -10000: with max_age, auth_time is in the ID token; max_age=1 on a browser signed in
    more than a second ago asks for the password again and auth_time moves on."""
    browser = Browser()
    body, params, _ = _tokens_in(browser, max_age="10000")
    first = id_token_claims(body, params)
    check(isinstance(first.get("auth_time"), int), f"max_age=10000: no auth_time in {first}")
    time.sleep(2.2)
    params, verifier, redirect = authorization_params(WEB, max_age="1")
    callback = browser.authorize(params, redirect, who=user(WHO))
    check(callback.logins >= 1, "max_age=1 after 2 s: the user was not asked to sign in again")
    body = expect_json(exchange_code(WEB, callback["code"], redirect, verifier), 200, "code exchange")
    second = id_token_claims(body, params)
    check(isinstance(second.get("auth_time"), int) and second["auth_time"] > first["auth_time"],
          f"max_age=1: auth_time {second.get('auth_time')!r} not after the first sign-in's {first['auth_time']}")


def _tokens_in(browser, **extra):
    callback, params, verifier, redirect, _ = sign_in(WEB, WHO, browser=browser, **extra)
    return expect_json(exchange_code(WEB, callback["code"], redirect, verifier), 200, "code exchange"), params, callback


@case
def oidcc_prompt_none_logged_in():
    """oidcc-prompt-none-logged-in: a browser signed in gets a code for prompt=none without a page."""
    browser = Browser()
    body, params, _ = _tokens_in(browser)
    first = id_token_claims(body, params)
    params, verifier, redirect = authorization_params(WEB, prompt="none")
    callback = browser.authorize(params, redirect, who=None)
    check("code" in callback.params, f"prompt=none with a session: no code in {callback.url}")
    body = expect_json(exchange_code(WEB, callback["code"], redirect, verifier), 200, "code exchange")
    check(id_token_claims(body, params)["sub"] == first["sub"], "prompt=none: another subject")


@case
def oidcc_prompt_none_not_logged_in():
    """oidcc-prompt-none-not-logged-in: prompt=none and no session → error=login_required in the redirect,
    with the state and iss."""
    params, _, redirect = authorization_params(WEB, prompt="none")
    callback = Browser().authorize(params, redirect, who=None)
    check(callback.get("error") == "login_required", f"expected error=login_required, got {callback.url}")
    check("code" not in callback.params, f"a code with an error: {callback.url}")
    check(callback.get("state") == params["state"], f"state not echoed with the error: {callback.url}")
    check(callback.get("iss") == ISSUER, f"iss {callback.get('iss')!r} with the error (RFC 9207)")


@case
def oidcc_prompt_login():
    """oidcc-prompt-login: a signed-in browser is asked to sign in again with prompt=login."""
    browser = Browser()
    _tokens_in(browser)
    params, _, redirect = authorization_params(WEB, prompt="login")
    callback = browser.authorize(params, redirect, who=user(WHO))
    check(callback.logins >= 1, "prompt=login: no login page was shown")
    check("code" in callback.params, f"prompt=login: no code after signing in: {callback.url}")


@case
def oidcc_state_echoed_and_iss():
    """The state comes back unchanged, and iss (RFC 9207) is the issuer, in a success response."""
    state = "s/" + secrets.token_urlsafe(24) + "+= &?"
    params, _, redirect = authorization_params(WEB, state=state)
    callback = Browser().authorize(params, redirect, who=user(WHO))
    check(callback.get("state") == state, f"state {callback.get('state')!r} != sent {state!r}")
    check(callback.get("iss") == ISSUER, f"iss {callback.get('iss')!r} != {ISSUER!r}")


@case
def oidcc_ensure_post_request_succeeds():
    """The authorization request as a POSTed form (OIDC Core §3.1.2.1)."""
    params, verifier, redirect = authorization_params(WEB)
    callback = Browser().authorize(params, redirect, who=user(WHO), method="POST")
    check("code" in callback.params, f"POST authorization: no code in {callback.url}")
    body = expect_json(exchange_code(WEB, callback["code"], redirect, verifier), 200, "code exchange")
    id_token_claims(body, params)


@case
def oidcc_ensure_other_scope_order_succeeds():
    body, params, _ = tokens_for(WEB, WHO, scope="email openid")
    id_token_claims(body, params)


@case
def oidcc_codereuse():
    """oidcc-codereuse / -30seconds: the second exchange of a code is refused, and (RFC 6749 §4.1.2) what the
    first one gave is revoked: its access token at userinfo and its refresh token."""
    callback, _, verifier, redirect, _ = sign_in(WEB, WHO)
    first = expect_json(exchange_code(WEB, callback["code"], redirect, verifier), 200, "first code exchange")
    expect_status(_userinfo(first["access_token"]), 200, "userinfo before the reuse")
    expect_oauth_error(exchange_code(WEB, callback["code"], redirect, verifier), "invalid_grant", "second code exchange")
    reply = _userinfo(first["access_token"])
    expect_status(reply, 401, "userinfo with the first exchange's access token after the code's reuse")
    if "refresh_token" in first:
        expect_oauth_error(token_request({"grant_type": "refresh_token", "refresh_token": first["refresh_token"]},
                                         basic_auth(WEB)), "invalid_grant", "refresh of the first exchange after the reuse")


def _authorize_raw(params):
    return requests.get(endpoint("authorization_endpoint"), params=params, allow_redirects=False, timeout=TIMEOUT)


def expect_error_page(reply, what):
    """An authorization error that must not go to the redirect URI: a 400 page, no Location."""
    check(reply.status_code == 400, f"{what}: expected an HTTP 400 error page, got {show(reply)}")
    check("Location" not in reply.headers, f"{what}: redirected to {reply.headers.get('Location')}")


def expect_login_page(params, what):
    """The control of a negative test: the same request, made valid, reaches the login page."""
    browser = Browser()
    reply = browser.http.get(endpoint("authorization_endpoint"), params=params, allow_redirects=False, timeout=TIMEOUT)
    for _ in range(5):
        if not reply.is_redirect:
            break
        location = urllib.parse.urljoin(reply.url, reply.headers["Location"])
        check(location.startswith(BASE + "/"), f"{what} (control): redirected away to {location}")
        reply = browser.http.get(location, allow_redirects=False, timeout=TIMEOUT)
    check(reply.status_code == 200 and login_form(reply.text)[0] is not None, f"{what} (control): no login page: {show(reply)}")


@case
def oidcc_prompt_none_max_age_exceeded():
    """prompt=none with a max_age the browser's sign-in is older than → login_required (no silent code)."""
    browser = Browser()
    _tokens_in(browser)
    time.sleep(2.2)
    params, _, redirect = authorization_params(WEB, prompt="none", max_age="1")
    callback = browser.authorize(params, redirect, who=None)
    check(callback.get("error") == "login_required" and "code" not in callback.params,
          f"prompt=none, max_age=1, signed in 2 s ago: expected error=login_required, got {callback.url}")


@case
def oidcc_scope_narrows_claims():
    """oidcc-scope-email / the openid scope alone: userinfo and the ID token carry email only when the email
    scope was granted."""
    body, params, _ = tokens_for(WEB, WHO, scope="openid")
    claims = id_token_claims(body, params)
    check("email" not in claims, f"scope openid: the ID token carries email {claims.get('email')!r}")
    info = expect_json(_userinfo(body["access_token"]), 200, "userinfo (scope openid)")
    check(info.get("sub") == claims["sub"], "userinfo sub")
    check("email" not in info, f"scope openid: userinfo carries email {info.get('email')!r}")
    body, params, _ = tokens_for(WEB, WHO, scope="openid email")
    info = expect_json(_userinfo(body["access_token"]), 200, "userinfo (scope openid email)")
    check(info.get("email") == user(WHO)["handle"], f"scope email: userinfo email {info.get('email')!r}")


@case
def oidcc_login_hint_prefills_handle():
    """login_hint: the hosted page offers the hinted handle."""
    params, _, _ = authorization_params(WEB, login_hint=user(WHO)["handle"])
    browser = Browser()
    reply = browser.http.get(endpoint("authorization_endpoint"), params=params, allow_redirects=True, timeout=TIMEOUT)
    form, _ = login_form(reply.text)
    check(form is not None, f"login_hint: no login page: {show(reply)}")
    values = [i.get("value") for i in form["inputs"] if i.get("name") == "handle"]
    check(values == [user(WHO)["handle"]], f"login_hint: the handle field holds {values!r}")


@case
def code_bound_to_its_client():
    """A code issued to one client is refused to another (RFC 6749 §4.1.3), and stays usable by its own."""
    callback, _, verifier, redirect, _ = sign_in(WEB, WHO)
    expect_oauth_error(exchange_code("web_post", callback["code"], redirect, verifier), "invalid_grant",
                       "a code of client web exchanged by client web_post")


@case
def rp_initiated_logout_ends_session():
    """OpenID Connect RP-Initiated Logout: with id_token_hint the browser goes to the registered post-logout
    URI with the state; the session's refresh and access tokens die, and the browser is signed out."""
    browser = Browser()
    body, _, _ = _tokens_in(browser)
    expect_status(_userinfo(body["access_token"]), 200, "userinfo before logout")
    target = client(WEB)["postLogoutRedirectURIs"][0]
    state = secrets.token_urlsafe(12)
    reply = browser.http.get(endpoint("end_session_endpoint"), allow_redirects=False, timeout=TIMEOUT, params={
        "id_token_hint": body["id_token"], "post_logout_redirect_uri": target, "state": state})
    check(reply.is_redirect, f"logout with id_token_hint: expected a redirect, got {show(reply)}")
    location = reply.headers["Location"]
    check(same_endpoint(location, target), f"logout: redirected to {location}, not {target}")
    check(dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query)).get("state") == state, f"logout: state lost: {location}")
    expect_status(_userinfo(body["access_token"]), 401, "userinfo after logout")
    expect_oauth_error(token_request({"grant_type": "refresh_token", "refresh_token": body["refresh_token"]}, basic_auth(WEB)),
                       "invalid_grant", "refresh after logout")
    params, _, redirect = authorization_params(WEB, prompt="none")
    callback = browser.authorize(params, redirect, who=None)
    check(callback.get("error") == "login_required", f"prompt=none after logout: {callback.url}")


@case
def logout_without_hint_needs_confirmation():
    """Without id_token_hint a logout URL alone (a third-party page) signs nobody out: the page asks, and only the
    confirmed form ends the browser's session."""
    browser = Browser()
    body, _, _ = _tokens_in(browser)
    reply = browser.http.get(endpoint("end_session_endpoint"), params={"client_id": client(WEB)["clientId"]},
                             allow_redirects=False, timeout=TIMEOUT)
    check(reply.status_code == 200 and "html" in reply.headers.get("Content-Type", ""), f"logout without hint: {show(reply)}")
    expect_status(_userinfo(body["access_token"]), 200, "userinfo after an unconfirmed logout")
    forms = [f for f in _page_forms(reply.text) if f["method"] == "POST"]
    check(len(forms) >= 1, f"logout without hint: no confirmation form: {reply.text[:300]!r}")
    form = forms[0]
    fields = [(i["name"], i.get("value", "")) for i in form["inputs"] if i.get("name") and i.get("type", "text").lower() != "submit"]
    buttons = [b for b in form["buttons"] if b.get("name")]
    if buttons:
        fields.append((buttons[0]["name"], buttons[0].get("value", "")))
    action = urllib.parse.urljoin(reply.url, form["action"] or reply.url)
    done = browser.http.post(action, data=fields, allow_redirects=False, timeout=TIMEOUT, headers={"Origin": browser.origin})
    check(done.status_code in (200, 302, 303), f"logout confirmation: {show(done)}")
    expect_status(_userinfo(body["access_token"]), 401, "userinfo after the confirmed logout")


@case
def oidcc_ensure_registered_redirect_uri():
    """oidcc-ensure-registered-redirect-uri: an unregistered redirect_uri gets an error page, never a redirect
    (another host; and a loopback URI with the registered host but another path)."""
    params, _, redirect = authorization_params(WEB)
    expect_login_page(params, "registered redirect_uri")
    for evil in ("https://attacker.example/rp/callback", redirect.replace("/rp/callback", "/rp/other"),
                 redirect + "/more", redirect + "?x=1"):
        expect_error_page(_authorize_raw(dict(params, redirect_uri=evil)), f"redirect_uri {evil}")


@case
def oidcc_unknown_client_no_redirect():
    params, _, _ = authorization_params(WEB)
    reply = _authorize_raw(dict(params, client_id="cci_" + secrets.token_urlsafe(16)[:22]))
    check(reply.status_code in (400, 401) and "Location" not in reply.headers,
          f"unknown client_id: expected an error page, got {show(reply)}")


@case
def oidcc_token_redirect_uri_mismatch():
    """The token request's redirect_uri must be the authorization request's (RFC 6749 §4.1.3)."""
    callback, _, verifier, redirect, _ = sign_in(WEB, WHO)
    other = client(WEB)["redirectURIs"][0].replace("/rp/callback", "/rp/other")
    expect_oauth_error(exchange_code(WEB, callback["code"], other, verifier), "invalid_grant", "token with another redirect_uri")


@case
def pkce_plain_refused():
    """code_challenge_method=plain is refused (S256 only): invalid_request in the redirect, no code."""
    verifier, _ = pkce()
    params, _, redirect = authorization_params(WEB, code_challenge=verifier, code_challenge_method="plain")
    callback = Browser().authorize(params, redirect, who=None)
    check(callback.get("error") == "invalid_request" and "code" not in callback.params,
          f"PKCE plain: expected error=invalid_request, got {callback.url}")
    check(callback.get("state") == params["state"] and callback.get("iss") == ISSUER, f"error without state/iss: {callback.url}")


@case
def pkce_missing_refused():
    params, _, redirect = authorization_params(WEB, code_challenge=None, code_challenge_method=None)
    callback = Browser().authorize(params, redirect, who=None)
    check(callback.get("error") == "invalid_request" and "code" not in callback.params,
          f"no PKCE: expected error=invalid_request, got {callback.url}")


@case
def pkce_wrong_verifier_refused():
    callback, _, verifier, redirect, _ = sign_in(WEB, WHO)
    wrong, _ = pkce()
    expect_oauth_error(exchange_code(WEB, callback["code"], redirect, wrong), "invalid_grant", "token with a wrong code_verifier")


@case
def oidcc_client_auth_wrong_secret():
    """A confidential client with a wrong secret: invalid_client, HTTP 401 (RFC 6749 §5.2)."""
    callback, _, verifier, redirect, _ = sign_in(WEB, WHO)
    data = {"grant_type": "authorization_code", "code": callback["code"], "redirect_uri": redirect, "code_verifier": verifier}
    bad = base64.b64encode(f"{client(WEB)['clientId']}:wrong-secret".encode()).decode()
    reply = token_request(data, {"Authorization": "Basic " + bad})
    expect_oauth_error(reply, "invalid_client", "token with a wrong client secret", status=401)


@case
def oidcc_client_secret_post():
    """client_secret_post (a second confidential client)."""
    callback, params, verifier, redirect, _ = sign_in("web_post", WHO)
    body = expect_json(exchange_code("web_post", callback["code"], redirect, verifier), 200, "client_secret_post exchange")
    id_token_claims(body, params)


@case
def rfc6749_invalid_client_challenge():
    """RFC 6749 §5.2: a client that authenticated with HTTP Basic and failed gets 401 with WWW-Authenticate: Basic."""
    bad = base64.b64encode(f"{client(WEB)['clientId']}:wrong".encode()).decode()
    reply = token_request({"grant_type": "refresh_token", "refresh_token": "x"}, {"Authorization": "Basic " + bad})
    expect_oauth_error(reply, "invalid_client", "refresh with a wrong secret", status=401)
    check(reply.headers.get("WWW-Authenticate", "").lower().startswith("basic"),
          f"invalid_client after Basic: WWW-Authenticate {reply.headers.get('WWW-Authenticate')!r}")


@case
def rfc6749_duplicate_authorization_parameter():
    """RFC 6749 §3.1: a parameter sent twice is an error, never a code."""
    params, _, redirect = authorization_params(WEB)
    query = urllib.parse.urlencode(list(params.items()) + [("scope", "openid")])
    reply = requests.get(endpoint("authorization_endpoint") + "?" + query, allow_redirects=False, timeout=TIMEOUT)
    if reply.is_redirect:
        location = reply.headers["Location"]
        check(same_endpoint(location, redirect) and "error=invalid_request" in location and "code=" not in location,
              f"duplicate scope: redirected to {location}")
    else:
        expect_error_page(reply, "duplicate scope")


@case
def refresh_token_bound_to_its_client():
    """A refresh token is the client's: another client presenting it gets invalid_grant, and the token still
    works for its own client."""
    body, _, _ = tokens_for(WEB, WHO)
    c = client("web_post")
    expect_oauth_error(token_request({"grant_type": "refresh_token", "refresh_token": body["refresh_token"],
                                      "client_id": c["clientId"], "client_secret": c["clientSecret"]}),
                       "invalid_grant", "a refresh token of client web presented by client web_post")
    expect_json(token_request({"grant_type": "refresh_token", "refresh_token": body["refresh_token"]}, basic_auth(WEB)), 200,
                "the refresh token with its own client afterwards")


@case
def refresh_scope_cannot_grow():
    """RFC 6749 §6: a refresh may narrow the scope, never widen it."""
    body, _, _ = tokens_for(WEB, WHO, scope="openid offline_access")
    wider = token_request({"grant_type": "refresh_token", "refresh_token": body["refresh_token"], "scope": "openid offline_access email"},
                          basic_auth(WEB))
    expect_oauth_error(wider, "invalid_scope", "refresh asking for a scope the grant lacks")
    narrower = expect_json(token_request({"grant_type": "refresh_token", "refresh_token": body["refresh_token"], "scope": "openid"},
                                         basic_auth(WEB)), 200, "refresh narrowing the scope")
    _, claims = verify_jwt(narrower["access_token"], "narrowed access token", typ="at+jwt")
    check(claims.get("scope", "").split() == ["openid"], f"narrowed refresh: access token scope {claims.get('scope')!r}")


def _userinfo(token, method="GET"):
    url = endpoint("userinfo_endpoint")
    if method == "GET":
        return requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT)
    return requests.post(url, headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT)


@case
def oidcc_userinfo_get_and_post():
    """oidcc-userinfo-get / -post-header: the same sub as the ID token, email by the email scope."""
    body, params, _ = tokens_for(WEB, WHO, scope="openid email")
    sub = id_token_claims(body, params)["sub"]
    for method in ("GET", "POST"):
        info = expect_json(_userinfo(body["access_token"], method), 200, f"userinfo {method}")
        check(info.get("sub") == sub, f"userinfo {method}: sub {info.get('sub')!r} != the ID token's {sub!r}")
        check(info.get("email") == user(WHO)["handle"], f"userinfo {method}: email {info.get('email')!r}")


@case
def oidcc_userinfo_bad_token():
    reply = _userinfo("not-a-token")
    expect_status(reply, 401, "userinfo with garbage")
    check("invalid_token" in reply.headers.get("WWW-Authenticate", ""),
          f"userinfo: WWW-Authenticate {reply.headers.get('WWW-Authenticate')!r} (RFC 6750 §3)")
    expect_status(requests.get(endpoint("userinfo_endpoint"), timeout=TIMEOUT), 401, "userinfo without a token")


@case
def userinfo_after_revocation_refused():
    """RFC 7009: revoking the access token (here with its refresh token's grant) ends userinfo."""
    body, _, _ = tokens_for(WEB, WHO)
    expect_status(_userinfo(body["access_token"]), 200, "userinfo before revocation")
    reply = requests.post(endpoint("revocation_endpoint"), headers=basic_auth(WEB), timeout=TIMEOUT,
                          data={"token": body["access_token"], "token_type_hint": "access_token"})
    expect_status(reply, 200, "revocation of the access token")
    expect_status(_userinfo(body["access_token"]), 401, "userinfo after revocation")


@case
def userinfo_after_session_revoked_by_admin():
    """The access token carries the session: ending the session (admin API) ends the token."""
    body, _, _ = tokens_for(WEB, WHO)
    _, access = verify_jwt(body["access_token"], "access token", typ="at+jwt")
    sid = access.get("sid")
    check(isinstance(sid, str), f"access token: no sid in {access}")
    expect_status(_userinfo(body["access_token"]), 200, "userinfo before the session was ended")
    reply = admin("DELETE", f"/apps/{WORLD['appId']}/users/{user(WHO)['userId']}/sessions/{sid}")
    check(reply.status_code in (200, 204), f"admin: ending the session: {reply.status_code} {reply.text[:300]}")
    expect_status(_userinfo(body["access_token"]), 401, "userinfo after the session was ended")


@case
def oidcc_refresh_token():
    """oidcc-refresh-token: a refresh gives new tokens; a new ID token (if any) keeps iss, sub, aud."""
    body, params, _ = tokens_for(WEB, WHO)
    check(isinstance(body.get("refresh_token"), str), f"no refresh_token (offline_access asked): {body}")
    first = id_token_claims(body, params)
    reply = token_request({"grant_type": "refresh_token", "refresh_token": body["refresh_token"]}, basic_auth(WEB))
    again = expect_json(reply, 200, "refresh")
    check(again.get("access_token") and again["access_token"] != body["access_token"], "refresh: same access token")
    if "id_token" in again:
        _, claims = verify_jwt(again["id_token"], "refreshed id_token")
        for key in ("iss", "sub", "aud"):
            check(claims.get(key) == first.get(key), f"refreshed id_token: {key} {claims.get(key)!r} != {first.get(key)!r}")


@case
def oidcc_response_type_missing():
    """oidcc-response-type-missing: no response_type → an error (in the redirect, or a 400 page), never a code."""
    params, _, redirect = authorization_params(WEB, response_type=None)
    reply = _authorize_raw(params)
    if reply.is_redirect:
        location = reply.headers["Location"]
        check(same_endpoint(location, redirect), f"no response_type: redirected to {location}")
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
        check("code" not in query and query.get("error") in ("invalid_request", "unsupported_response_type"),
              f"no response_type: redirected to {location}")
        check(query.get("state") == params["state"], f"no response_type: error without the state: {location}")
    else:
        expect_error_page(reply, "no response_type")
    # response_type=token (implicit, gone in OAuth 2.1) is refused the same way
    reply = _authorize_raw(dict(params, response_type="token"))
    if reply.is_redirect:
        location = reply.headers["Location"]
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query + "&" + urllib.parse.urlsplit(location).fragment))
        check("access_token" not in query and query.get("error") == "unsupported_response_type",
              f"response_type=token: redirected to {location}")
    else:
        expect_error_page(reply, "response_type=token")


if __name__ == "__main__":
    run_cases("basic_op")
