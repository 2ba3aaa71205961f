"""Passkeys in the Portal, in the browser (issue 23). Run by walk.py after the main walk (run(args, world)); the
main walk's developer already added a passkey on /portal/account and signed in with it.

Here an invited account takes the other road: it accepts its invitation, and on the enrolment page creates a
passkey (#passkey-enrol, Chromium's virtual authenticator) instead of entering a TOTP code; it is signed in at once.
It signs out, signs in with the passkey alone (#passkey-sign-in, no e-mail typed), proves itself again with the
passkey on /portal/reauth (#passkey-reauth), and its account page lists the passkey. Its password alone no longer
signs it in. Then the passkey endpoints get hostile JSON (with the page's valid CSRF token): never a 5xx.
"""
import json
import random
import secrets

from selenium.webdriver.common.by import By

from walk import CheckFailed, Portal, log

PASSWORD = "Passkey-Walk-Passw0rd!"
ENDPOINTS = ["sign-in/options", "sign-in/finish", "enrol/options", "enrol/finish", "add/options", "add/finish",
             "reauth/options", "reauth/finish"]


def hostile_bodies(rng, csrf):
    junk = ["", "x", "A" * 5000, "\u0000", "../../etc", "<script>", -1, 1e308, None, True, [], {}, {"a": [1, {"b": None}]}]
    credentials = [
        {}, {"id": "AAAA"}, {"id": "AAAA", "response": {}}, {"id": "!!", "rawId": "??", "type": "x",
                                                             "response": {"clientDataJSON": "e30", "signature": "AA"}},
        {"id": "AAAA", "response": {"clientDataJSON": "eyJjaGFsbGVuZ2UiOiJBQUFBIn0", "authenticatorData": "A" * 100,
                                    "signature": "B" * 90, "attestationObject": "oA", "userHandle": "AA"}},
    ]
    for _ in range(40):
        body = {"csrf": csrf}
        for name in ("email", "name", "next", "credential"):
            if rng.random() < 0.6:
                body[name] = rng.choice(junk + credentials if name == "credential" else junk)
        yield json.dumps(body)
    yield "{"
    yield "[]"
    yield json.dumps({"csrf": csrf, "credential": credentials[-1]})


def fuzz_endpoints(args, browser, csrf, label):
    http = browser.http()
    rng = random.Random(args.seed)
    failures = 0
    for endpoint in ENDPOINTS:
        for body in hostile_bodies(rng, csrf):
            r = http.post(f"{args.base}/portal/passkey/{endpoint}", data=body.encode(), timeout=30,
                          headers={"Content-Type": "application/json"})
            if r.status_code >= 500:
                failures += 1
                browser.fail(f"{label}: POST /portal/passkey/{endpoint} {body[:120]!r}: HTTP {r.status_code}")
    log(f"passkey endpoints fuzzed ({label}): {'no 5xx' if not failures else f'{failures} answers 5xx'}")


def run(args, world):
    op = Portal.signed_in("operator", args, world)
    email = f"passkey-{secrets.token_hex(4)}@example.com"
    link = op.invite(world["app_id"], email, "viewer")
    op.quit()
    world["browsers"].remove(op)

    who = Portal("passkey-viewer", args)
    world["browsers"].append(who)
    try:
        who.email, who.password = email, PASSWORD
        who.add_virtual_authenticator()
        who.get(link, "passkey-invite")
        who.fill("password", PASSWORD)
        who.fill("password-confirm", PASSWORD)
        who.submit("invite-submit", "passkey-enrol-page")
        if not who.has("enrol-submit"):
            raise CheckFailed("the enrolment page lost its TOTP form (the path without JavaScript)")
        who.passkey_click("passkey-enrol", "after-passkey-enrolment")
        who.expect_signed_in("after enrolling a passkey")
        if len(who.passkeys_held()) != 1:
            who.fail(f"the virtual authenticator holds {len(who.passkeys_held())} credentials after the enrolment")
        log("an invited account enrolled a passkey instead of TOTP and is signed in")

        # Sign-in page fuzz while signed out needs the sign-in page's token; the signed-in endpoints get the
        # account page's and the reauth page's tokens.
        who.get("/portal/account", "passkey-account")
        listed = who.driver.find_elements(By.CSS_SELECTOR, "#passkeys .passkey-name")
        if len(listed) != 1:
            who.fail(f"#passkeys lists {len(listed)} passkeys, expected the one just enrolled")
        fuzz_endpoints(args, who, who.el("passkey-add").get_attribute("data-csrf"), "account page token")

        who.get("/portal/reauth?next=/portal/account", "passkey-reauth")
        who.passkey_click("passkey-reauth", "after-passkey-reauth")
        if who.path() != "/portal/account":
            who.fail(f"the passkey reauth ended on {who.path()}, not /portal/account")

        who.sign_out()
        # The password alone does not sign in an account whose second factor is a passkey.
        who.get("/portal/sign-in", "passkey-password-only")
        who.fill("email", email)
        who.fill("password", PASSWORD)
        who.submit("sign-in-submit", "passkey-password-refused")
        if who.has("sign-out") or not who.has("form-error"):
            who.fail("the password alone signed in (or no #form-error) an account that enrolled only a passkey")
        fuzz_endpoints(args, who, who.el("passkey-sign-in").get_attribute("data-csrf"), "sign-in page token")
        who.sign_in_with_passkey()
        log("the passkey account signed out and in again with its passkey, and reauthenticated with it")
    finally:
        who.quit()
        world["browsers"].remove(who)
