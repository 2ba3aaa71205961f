"""idpyoidc (the Identity Python OpenID Connect library) as a relying party: discovery from
{issuer}/.well-known/openid-configuration, the code flow with PKCE through the hosted login page, the ID
token validated by the library (signature through jwks_uri, iss, aud, exp, nonce), userinfo, refresh.
Client "web" (confidential, client_secret_basic), user "idpyoidc".

Run by Tests/system/oauth/run.sh; alone: OAUTH_WORLD=world.json python test_idpyoidc.py [-k name]
"""
import logging
import urllib.parse

from idpyoidc.client.rp_handler import RPHandler

from harness import (ISSUER, Browser, case, check, client, redirect_uri, run_cases, user, verify_jwt)

logging.basicConfig(level=logging.ERROR)
WEB = "web"
WHO = "idpyoidc"
PKCE = {"function": "idpyoidc.client.oauth2.add_on.pkce.add_support",
        "kwargs": {"code_challenge_length": 64, "code_challenge_method": "S256"}}


def relying_party(redirect):
    c = client(WEB)
    configs = {ISSUER: {
        "issuer": ISSUER, "client_id": c["clientId"], "client_secret": c["clientSecret"], "redirect_uris": [redirect],
        "client_type": "oidc", "client_authn_methods": ["client_secret_basic"],
        "preference": {"response_types": ["code"], "token_endpoint_auth_method": "client_secret_basic"},
        "add_ons": {"pkce": PKCE},
    }}
    base = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(redirect))
    return RPHandler(base_url=base, client_configs=configs, key_conf={"key_defs": [{"type": "RSA", "use": ["sig"]}]})


def sign_in(scope="openid profile email offline_access"):
    """begin → hosted login page → finalize: answers (handler, finalize's result, the authorization request)."""
    redirect = redirect_uri(WEB)
    rph = relying_party(redirect)
    url = rph.begin(issuer_id=ISSUER, req_args={"scope": scope})
    request = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    check(url.startswith(ISSUER + "/"), f"idpyoidc built its request for another endpoint: {url}")
    check(request.get("code_challenge_method") == "S256" and request.get("nonce"), f"idpyoidc request without PKCE or nonce: {url}")
    browser = Browser()
    callback = browser.follow(browser.http.get(url, allow_redirects=False), redirect, user(WHO))
    result = rph.finalize(ISSUER, dict(callback.params))
    check(not result.get("error"), f"idpyoidc finalize: {result.get('error')}: {result.get('error_description', '')}")
    return rph, result, request


@case
def idpyoidc_discovery():
    """The library reads the issuer's metadata and keys: issuer, endpoints, and the JWKS from jwks_uri."""
    rph = relying_party(redirect_uri(WEB))
    rp = rph.client_setup(ISSUER)
    info = rp.get_context().provider_info
    check(info.get("issuer") == ISSUER, f"idpyoidc: provider issuer {info.get('issuer')!r}")
    for name in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri"):
        check(str(info.get(name, "")).startswith(ISSUER + "/"), f"idpyoidc: {name} {info.get(name)!r}")
    rp.keyjar.load_keys(ISSUER, jwks_uri=info["jwks_uri"])
    keys = rp.keyjar.get_signing_key("RSA", issuer_id=ISSUER)
    check(keys, "idpyoidc: no RSA signing key of the issuer after loading jwks_uri")


@case
def idpyoidc_code_flow_id_token_and_userinfo():
    """The whole relying-party flow. idpyoidc itself checks the ID token (signature by the jwks_uri key, iss,
    aud, exp, iat, and that the nonce is the one it sent: it refuses the token otherwise); this test checks
    again what it got, and the userinfo."""
    _, result, request = sign_in()
    id_token = result.get("id_token")
    check(id_token is not None, f"idpyoidc: no verified ID token in {sorted(result)}")
    check(id_token["iss"] == ISSUER, f"id_token iss {id_token['iss']!r}")
    check(id_token["nonce"] == request["nonce"], f"id_token nonce {id_token['nonce']!r} != sent {request['nonce']!r}")
    check(id_token["sub"] == user(WHO)["userId"].lower(), f"id_token sub {id_token['sub']!r}")
    aud = id_token["aud"]
    check(client(WEB)["clientId"] in (aud if isinstance(aud, list) else [aud]), f"id_token aud {aud!r}")
    info = result.get("userinfo")
    check(info is not None, f"idpyoidc: no userinfo in {sorted(result)}")
    check(info["sub"] == id_token["sub"], f"userinfo sub {info['sub']!r} != id_token sub {id_token['sub']!r}")
    check(info.get("email") == user(WHO)["handle"], f"userinfo email {info.get('email')!r}")
    # the access token the library got is an RFC 9068 JWT of the issuer (our own JWKS check)
    check(isinstance(result.get("token"), str), f"idpyoidc: no access token in {sorted(result)}")
    _, access = verify_jwt(result["token"], "access token", typ="at+jwt")
    check(access.get("sub") == id_token["sub"] and access.get("client_id") == client(WEB)["clientId"],
          f"access token sub/client_id {access.get('sub')!r}/{access.get('client_id')!r}")


@case
def idpyoidc_refresh_and_userinfo_again():
    rph, result, _ = sign_in()
    state = result["state"]
    before = rph.get_valid_access_token(state)[0]
    stored = rph.get_client_from_session_key(state).get_context().cstate.get_set(state, claim=["refresh_token"])
    old_refresh = stored.get("refresh_token")
    check(isinstance(old_refresh, str), "idpyoidc kept no refresh token from the code exchange (offline_access asked)")
    refreshed = rph.refresh_access_token(state)
    check("error" not in refreshed, f"idpyoidc refresh: {refreshed.to_dict()}")
    check(refreshed.get("access_token") and refreshed["access_token"] != before, "idpyoidc refresh: no new access token")
    check(refreshed.get("refresh_token") and refreshed["refresh_token"] != old_refresh,
          "idpyoidc refresh: the refresh token was not rotated")
    info = rph.get_user_info(state, access_token=refreshed["access_token"])
    check("error" not in info, f"userinfo after refresh: {info.to_dict()}")
    check(info.get("sub") == user(WHO)["userId"].lower(), f"userinfo after refresh: {info.to_dict()}")


if __name__ == "__main__":
    run_cases("idpyoidc")
