"""A black-box DPoP client (RFC 9449) against a live CosyncAuth token endpoint, built on jwcrypto.

It makes its own proofs (ES256 keys from jwcrypto) and checks that the server refuses each broken one:
a wrong `htu`, a wrong `htm`, a replayed `jti`, a stale (and a future) `iat`, a missing or unknown nonce,
a key mismatch (the proof signed by another key than its `jwk`; a refresh token bound to one key
refreshed with another), `alg: none`, a private key in the `jwk`, a wrong `ath` at userinfo; and that a
good proof binds the tokens (`token_type` DPoP, `cnf.jkt` = the key's RFC 7638 thumbprint) and is
answered with a fresh `DPoP-Nonce`.

The grant it uses is RFC 8693 token exchange: a legacy CosyncAuth end-user access token (from the
end-user API's login) is traded for an OAuth token set, so no browser is needed.

Usage
  Inside Tests/system/oauth/run.sh (no arguments): everything comes from the environment the harness
  exports: OAUTH_WORLD (setup.py's JSON: base, appId, appToken, operatorToken, users["dpop"]), or
  OAUTH_BASE / OAUTH_APP_ID / OAUTH_APP_TOKEN / OAUTH_OPERATOR_TOKEN.

  Standalone, against any running server:
    python dpop_client.py --base http://127.0.0.1:8080 --app-id APP_ID \\
        [--client-id ID | --operator-token TOKEN] \\
        [--legacy-token TOKEN | --app-token APP_TOKEN --handle USER --password PASSWORD] [-k CASE_FILTER]
  --client-id     a public client of the app whose grant types include token exchange and refresh_token
                  (ideally with DPoP required); without it, one is registered through the admin API
                  with --operator-token (POST /admin/v1/apps/{appId}/oauth/clients, dpopRequired true).
  --legacy-token  an end-user access token of the app (the subject token of the exchanges); without it,
                  one comes from POST /api/appuser/login with --app-token, --handle and --password (the
                  password is sent as MD5 hex, as the Cosync SDKs do).
  -k TEXT         runs only the cases whose name contains TEXT.
Needs: jwcrypto, requests (PyPI). Prints PASS/FAIL per case; exits 1 when any case fails.
"""
import argparse
import base64
import hashlib
import json
import os
import sys
import time
import traceback
import uuid

import requests
from jwcrypto import jwk, jws
from jwcrypto.common import json_encode

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
TIMEOUT = 30


class Config:
    base = ""
    app_id = ""
    issuer = ""
    client_id = ""
    legacy_token = ""


CFG = Config()
NONCE = {"value": None}


# --- small helpers -------------------------------------------------------------------------------------
def check(condition, message):
    if not condition:
        raise AssertionError(message)


def show(reply):
    body = reply.text if len(reply.text) <= 500 else reply.text[:500] + "…"
    return f"HTTP {reply.status_code} {reply.request.method} {reply.url} DPoP-Nonce={reply.headers.get('DPoP-Nonce')!r}: {body!r}"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def remember_nonce(reply):
    """Every answer of the server may carry the nonce to use next (RFC 9449 §8)."""
    nonce = reply.headers.get("DPoP-Nonce")
    if nonce:
        NONCE["value"] = nonce
    return reply


def token_url():
    return CFG.issuer + "/oauth/token"


def userinfo_url():
    return CFG.issuer + "/oauth/userinfo"


def new_key():
    return jwk.JWK.generate(kty="EC", crv="P-256")


def proof(key, method="POST", url=None, *, iat=None, jti=None, nonce="current", ath=None, signing_key=None, header=None,
          claims=None):
    """A DPoP proof by `key` (its public jwk in the header), signed by `signing_key` (default: `key`)."""
    public = key.export_public(as_dict=True)
    protected = {"typ": "dpop+jwt", "alg": "ES256", "jwk": public}
    protected.update(header or {})
    body = {"jti": jti or str(uuid.uuid4()), "htm": method, "htu": url or token_url(), "iat": int(time.time()) if iat is None else iat}
    if nonce == "current":
        nonce = NONCE["value"]
    if nonce is not None:
        body["nonce"] = nonce
    if ath is not None:
        body["ath"] = ath
    body.update(claims or {})
    signer = jws.JWS(json_encode(body))
    signer.add_signature(signing_key or key, alg="ES256", protected=json_encode(protected))
    return signer.serialize(compact=True)


def exchange(dpop=None, **extra):
    data = {"grant_type": EXCHANGE, "client_id": CFG.client_id, "subject_token": CFG.legacy_token,
            "subject_token_type": ACCESS_TOKEN_TYPE}
    data.update(extra)
    headers = {"DPoP": dpop} if dpop is not None else {}
    return remember_nonce(requests.post(token_url(), data=data, headers=headers, timeout=TIMEOUT))


def refresh(refresh_token, dpop):
    data = {"grant_type": "refresh_token", "client_id": CFG.client_id, "refresh_token": refresh_token}
    return remember_nonce(requests.post(token_url(), data=data, headers={"DPoP": dpop}, timeout=TIMEOUT))


def ensure_nonce():
    if NONCE["value"] is None:
        reply = exchange(proof(new_key(), nonce=None))
        check(reply.headers.get("DPoP-Nonce"), f"no DPoP-Nonce in the answer to a proof without nonce: {show(reply)}")


def expect_refused(reply, codes, what, words=None, status=400):
    codes = (codes,) if isinstance(codes, str) else tuple(codes)
    check(reply.status_code == status, f"{what}: expected HTTP {status}, got {show(reply)}")
    try:
        body = reply.json()
    except ValueError:
        raise AssertionError(f"{what}: the error is not JSON: {show(reply)}") from None
    check(body.get("error") in codes, f"{what}: expected error {' or '.join(codes)}, got {show(reply)}")
    if words:
        check(words in body.get("error_description", ""), f"{what}: the description does not mention {words!r}: {show(reply)}")
    if body.get("error") in ("invalid_dpop_proof", "use_dpop_nonce"):
        check(reply.headers.get("DPoP-Nonce"), f"{what}: no DPoP-Nonce to retry with: {show(reply)}")
    return body


def good_exchange(key, what):
    """A token set bound to `key`: answers the token JSON."""
    ensure_nonce()
    reply = exchange(proof(key))
    check(reply.status_code == 200, f"{what}: a good proof was refused: {show(reply)}")
    return reply.json()


def claims_of(jwt):
    return json.loads(b64url_decode(jwt.split(".")[1]))


# --- the cases -----------------------------------------------------------------------------------------
CASES = []


def case(fn):
    CASES.append(fn)
    return fn


@case
def discovery_lists_dpop_algorithms():
    reply = requests.get(CFG.issuer + "/.well-known/openid-configuration", timeout=TIMEOUT)
    check(reply.status_code == 200, f"discovery: {show(reply)}")
    algs = reply.json().get("dpop_signing_alg_values_supported")
    check(isinstance(algs, list) and "ES256" in algs and "none" not in algs and "HS256" not in algs,
          f"discovery: dpop_signing_alg_values_supported is {algs!r}")


@case
def a_proof_without_nonce_gets_use_dpop_nonce():
    reply = exchange(proof(new_key(), nonce=None))
    expect_refused(reply, "use_dpop_nonce", "a proof without nonce")
    check(reply.headers.get("Cache-Control", "").lower() == "no-store", f"no Cache-Control: no-store on {show(reply)}")


@case
def an_unknown_nonce_gets_use_dpop_nonce():
    expect_refused(exchange(proof(new_key(), nonce="not-a-nonce-of-this-server")), "use_dpop_nonce", "an unknown nonce")


@case
def a_good_proof_binds_the_tokens():
    key = new_key()
    ensure_nonce()
    reply = exchange(proof(key))
    check(reply.status_code == 200, f"a good proof was refused: {show(reply)}")
    check(reply.headers.get("DPoP-Nonce"), f"the success carries no fresh DPoP-Nonce: {show(reply)}")
    body = reply.json()
    check(str(body.get("token_type", "")).lower() == "dpop", f"token_type is {body.get('token_type')!r}, expected DPoP")
    jkt = key.thumbprint()  # RFC 7638, SHA-256
    cnf = claims_of(body["access_token"]).get("cnf")
    check(cnf == {"jkt": jkt}, f"the access token's cnf is {cnf!r}, expected {{'jkt': {jkt!r}}}")
    # The bound access token at userinfo: DPoP scheme with a proof carrying ath works, Bearer does not.
    access = body["access_token"]
    ath = b64url(hashlib.sha256(access.encode()).digest())
    reply = remember_nonce(requests.get(userinfo_url(), timeout=TIMEOUT, headers={
        "Authorization": f"DPoP {access}", "DPoP": proof(key, "GET", userinfo_url(), ath=ath)}))
    if reply.status_code == 401 and "use_dpop_nonce" in reply.headers.get("WWW-Authenticate", ""):
        reply = remember_nonce(requests.get(userinfo_url(), timeout=TIMEOUT, headers={
            "Authorization": f"DPoP {access}", "DPoP": proof(key, "GET", userinfo_url(), ath=ath)}))
    check(reply.status_code == 200, f"userinfo with the bound token and a good proof: {show(reply)}")
    reply = requests.get(userinfo_url(), timeout=TIMEOUT, headers={"Authorization": f"Bearer {access}"})
    check(reply.status_code == 401, f"userinfo with the bound token as a Bearer token: {show(reply)}")


@case
def a_wrong_htu_is_refused():
    ensure_nonce()
    for htu in (CFG.issuer + "/oauth/userinfo", CFG.base + "/apps/another-app/oauth/token", "https://elsewhere.example/oauth/token"):
        expect_refused(exchange(proof(new_key(), url=htu)), "invalid_dpop_proof", f"htu {htu}", words="htu")


@case
def a_wrong_htm_is_refused():
    ensure_nonce()
    for htm in ("GET", "PUT", "post"):
        expect_refused(exchange(proof(new_key(), method=htm)), "invalid_dpop_proof", f"htm {htm}", words="htm")


@case
def a_replayed_jti_is_refused():
    key = new_key()
    ensure_nonce()
    used = proof(key)
    check(exchange(used).status_code == 200, "the first use of a proof was refused")
    expect_refused(exchange(used), "invalid_dpop_proof", "the same proof again", words="used before")
    # A new proof (new iat, new signature) that repeats the jti is a replay too.
    jti = str(uuid.uuid4())
    check(exchange(proof(key, jti=jti)).status_code == 200, "a proof with a fresh jti was refused")
    expect_refused(exchange(proof(key, jti=jti)), "invalid_dpop_proof", "a new proof with a used jti", words="used before")


@case
def a_stale_or_future_iat_is_refused():
    ensure_nonce()
    now = int(time.time())
    expect_refused(exchange(proof(new_key(), iat=now - 600)), "invalid_dpop_proof", "iat 10 minutes ago", words="too old")
    expect_refused(exchange(proof(new_key(), iat=now + 600)), "invalid_dpop_proof", "iat 10 minutes ahead", words="future")
    for iat in ("now", 10 ** 30, -1, 1.5e308):
        expect_refused(exchange(proof(new_key(), iat=iat)), "invalid_dpop_proof", f"iat {iat!r}")


@case
def a_signature_by_another_key_is_refused():
    ensure_nonce()
    expect_refused(exchange(proof(new_key(), signing_key=new_key())), "invalid_dpop_proof", "jwk of one key, signed by another",
                   words="signature")


@case
def a_bound_refresh_token_needs_its_key():
    key = new_key()
    tokens = good_exchange(key, "exchange for a refresh token")
    check(isinstance(tokens.get("refresh_token"), str), f"no refresh_token in {tokens}")
    reply = refresh(tokens["refresh_token"], proof(new_key()))
    expect_refused(reply, ("invalid_grant", "invalid_dpop_proof"), "refresh with another key's proof")
    reply = refresh(tokens["refresh_token"], proof(key))
    check(reply.status_code == 200, f"refresh with the bound key: {show(reply)}")
    check(claims_of(reply.json()["access_token"]).get("cnf") == {"jkt": key.thumbprint()}, "the refreshed token lost its binding")


@case
def a_dpop_client_without_proof_is_refused():
    expect_refused(exchange(None), ("invalid_dpop_proof", "invalid_request"), "an exchange without a DPoP proof")


@case
def weak_or_unsafe_proofs_are_refused():
    ensure_nonce()
    key = new_key()
    # alg none: no signature at all.
    header = b64url(json.dumps({"typ": "dpop+jwt", "alg": "none", "jwk": key.export_public(as_dict=True)}).encode())
    payload = b64url(json.dumps({"jti": str(uuid.uuid4()), "htm": "POST", "htu": token_url(), "iat": int(time.time()),
                                 "nonce": NONCE["value"]}).encode())
    expect_refused(exchange(f"{header}.{payload}."), "invalid_dpop_proof", "alg none", words="alg")
    # The private key in the header.
    expect_refused(exchange(proof(key, header={"jwk": json.loads(key.export_private())})), "invalid_dpop_proof",
                   "a private jwk", words="private")
    # A plain JWT (typ JWT), and a proof far larger than any real one.
    expect_refused(exchange(proof(key, header={"typ": "JWT"})), "invalid_dpop_proof", "typ JWT", words="typ")
    expect_refused(exchange(proof(key, claims={"pad": "x" * 20000})), "invalid_dpop_proof", "a 27 KB proof", words="larger")
    expect_refused(exchange("garbage"), "invalid_dpop_proof", "garbage")


@case
def a_wrong_ath_at_userinfo_is_refused():
    key = new_key()
    access = good_exchange(key, "exchange for userinfo")["access_token"]
    wrong = b64url(hashlib.sha256(b"another token").digest())
    reply = remember_nonce(requests.get(userinfo_url(), timeout=TIMEOUT, headers={
        "Authorization": f"DPoP {access}", "DPoP": proof(key, "GET", userinfo_url(), ath=wrong)}))
    check(reply.status_code == 401, f"userinfo with a wrong ath: {show(reply)}")
    check("DPoP" in reply.headers.get("WWW-Authenticate", ""), f"no DPoP challenge: {show(reply)}")


# --- set-up and runner ---------------------------------------------------------------------------------
def configure():
    parser = argparse.ArgumentParser(description="Black-box DPoP (RFC 9449) checks against a CosyncAuth token endpoint.")
    parser.add_argument("--base")
    parser.add_argument("--app-id")
    parser.add_argument("--client-id")
    parser.add_argument("--operator-token")
    parser.add_argument("--legacy-token")
    parser.add_argument("--app-token")
    parser.add_argument("--handle")
    parser.add_argument("--password")
    parser.add_argument("-k", dest="filter")
    args = parser.parse_args()

    world = {}
    if os.environ.get("OAUTH_WORLD"):
        with open(os.environ["OAUTH_WORLD"]) as handle:
            world = json.load(handle)
    dpop_user = world.get("users", {}).get("dpop", {})
    CFG.base = (args.base or os.environ.get("OAUTH_BASE") or world.get("base") or "").rstrip("/")
    CFG.app_id = args.app_id or os.environ.get("OAUTH_APP_ID") or world.get("appId") or ""
    check(CFG.base and CFG.app_id, "give --base and --app-id (or run inside Tests/system/oauth/run.sh)")
    CFG.issuer = f"{CFG.base}/apps/{CFG.app_id}"
    operator = args.operator_token or os.environ.get("OAUTH_OPERATOR_TOKEN") or world.get("operatorToken")
    app_token = args.app_token or os.environ.get("OAUTH_APP_TOKEN") or world.get("appToken")

    CFG.client_id = args.client_id or ""
    if not CFG.client_id:
        check(operator, "give --client-id, or --operator-token to register a DPoP client")
        reply = requests.post(f"{CFG.base}/admin/v1/apps/{CFG.app_id}/oauth/clients", timeout=TIMEOUT,
                              headers={"Authorization": f"Bearer {operator}"},
                              json={"name": "DPoP black-box client", "kind": "public", "tokenEndpointAuthMethod": "none",
                                    "redirectUris": ["com.example.dpoptest:/callback"],
                                    "grantTypes": ["authorization_code", "refresh_token", EXCHANGE],
                                    "scopes": ["openid", "profile", "offline_access"], "dpopRequired": True})
        check(reply.status_code == 201, f"registering the DPoP client: {show(reply)}")
        CFG.client_id = reply.json()["clientId"]

    CFG.legacy_token = args.legacy_token or ""
    if not CFG.legacy_token:
        handle, password = args.handle or dpop_user.get("handle"), args.password or dpop_user.get("password")
        check(app_token and handle and password, "give --legacy-token, or --app-token, --handle and --password")
        reply = requests.post(f"{CFG.base}/api/appuser/login", headers={"app-token": app_token}, timeout=TIMEOUT,
                              data={"handle": handle, "password": hashlib.md5(password.encode()).hexdigest()})
        check(reply.status_code == 200 and "access-token" in reply.json(), f"legacy login: {show(reply)}")
        CFG.legacy_token = reply.json()["access-token"]
    return args.filter


def main():
    try:
        want = configure()
    except (AssertionError, requests.RequestException, KeyError, ValueError) as error:
        print(f"dpop_client: set-up failed: {error}", flush=True)
        sys.exit(2)
    passed, failed = [], []
    for fn in CASES:
        if want and want not in fn.__name__:
            continue
        start = time.monotonic()
        try:
            fn()
        except Exception as error:  # noqa: BLE001 (each failure is reported, then the next case runs)
            failed.append(fn.__name__)
            kind = "" if isinstance(error, AssertionError) else f"{type(error).__name__}: "
            print(f"FAIL dpop.{fn.__name__} ({time.monotonic() - start:.1f} s)\n     {kind}{error}", flush=True)
            for frame in traceback.extract_tb(error.__traceback__)[-3:]:
                print(f"     at {os.path.basename(frame.filename)}:{frame.lineno} {frame.line}", flush=True)
        else:
            passed.append(fn.__name__)
            print(f"PASS dpop.{fn.__name__} ({time.monotonic() - start:.1f} s)", flush=True)
    print(f"dpop: {len(passed)} passed, {len(failed)} failed" + (f": {', '.join(failed)}" if failed else ""), flush=True)
    sys.exit(1 if failed or not passed else 0)


if __name__ == "__main__":
    main()
