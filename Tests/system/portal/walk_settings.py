"""The Portal's settings slice in the browser (issue 23): the auth settings form, the e-mail template editor and its
preview, the app's lifecycle (suspend, activate, delete) and its keys (app secret and RSA key rotation, the JWKS
link). Run by walk.py after the main walk (run(args, world)).

Everything that changes an app happens on throwaway apps the operator creates here (world["app_id"] stays as the
other walks expect it). What the pages did is checked from outside, through the end-user API (getApplication,
signup, login) and the JWKS, and the admin API with the app's own secret. Every page: screenshot and axe (through
Portal.get / Portal.submit). Then a fuzz of this slice's forms (no 5xx).
"""
import base64
import hashlib
import json
import re
import time
import urllib.parse

import requests
from selenium.webdriver.common.by import By

from walk import CheckFailed, EndUser, Fuzz, Portal, forms_of, log, reauth, wait_for

END_USER_PASSWORD = "Settings-Walk-Passw0rd!"
HOSTILE_TEMPLATE = '<p>Hello %HANDLE%</p><img src=x onerror="alert(1)"><script>alert(2)</script>'


def login(base, app_token, handle):
    """The end-user login: (HTTP status, JSON body or text)."""
    r = requests.post(f"{base}/api/appuser/login", headers={"app-token": app_token}, timeout=30,
                      data={"handle": handle, "password": hashlib.md5(END_USER_PASSWORD.encode()).hexdigest()})
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, r.text


def b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwt_signers(base, app_id, token):
    """The kids of the app's JWKS keys that verify the JWT's RS256 signature (None without `cryptography`)."""
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding, rsa
    except ImportError:
        log("  (no cryptography module: the JWT's signing key is not checked)")
        return None
    head, body, signature = token.split(".")
    keys = requests.get(f"{base}/apps/{app_id}/.well-known/jwks.json", timeout=30).json().get("keys", [])
    found = []
    for key in keys:
        public = rsa.RSAPublicNumbers(int.from_bytes(b64url(key["e"]), "big"), int.from_bytes(b64url(key["n"]), "big")).public_key()
        try:
            public.verify(b64url(signature), f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
            found.append(key.get("kid"))
        except InvalidSignature:
            pass
    return found


def jwks_kids(base, app_id):
    r = requests.get(f"{base}/apps/{app_id}/.well-known/jwks.json", timeout=30)
    if r.status_code != 200:
        raise CheckFailed(f"GET the JWKS of {app_id}: HTTP {r.status_code}")
    return [k.get("kid") for k in r.json().get("keys", [])]


def admin_status(base, app_id, secret):
    return requests.get(f"{base}/admin/v1/apps/{app_id}", headers={"Authorization": f"Bearer {secret}"}, timeout=30).status_code


def fresh_submit(browser, button, label, fill=None):
    """Submits a destructive form (after `fill` fills it); when the Portal asks for a fresh sign-in first, signs in
    again (the page then comes back), fills and submits once more."""
    if fill:
        fill()
    browser.submit(button, label)
    if browser.path() == "/portal/reauth":
        browser.reauth_here()
        if fill:
            fill()
        browser.submit(button, label)


def run(args, world):
    base = args.base
    end_user = EndUser(base)
    suffix = str(int(time.time()))[-6:]
    op = Portal.signed_in("operator", args, world)
    try:
        walk_settings(args, world, op, end_user, suffix)
        walk_emails(op, world)
        walk_keys_and_lifecycle(args, world, op, end_user, suffix)
        walk_editor(args, world)
        if not args.no_fuzz:
            fuzz_settings(args, world, op, suffix)
    finally:
        op.quit()
        world["browsers"].remove(op)


def walk_settings(args, world, op, end_user, suffix):
    name = f"Settings walk {suffix}"
    app_id, token = op.create_app(name)
    world["settings_app"] = (app_id, token, op.text("app-secret") if op.has("app-secret") else "", name)
    op.get(f"/portal/apps/{app_id}/settings", "settings-form")
    for ident in ("signupFlow", "metadataFields", "passwordFilter", "handleType", "twoFactorVerification", "anonymousLoginEnabled",
                  "userNamesEnabled", "appleLoginEnabled", "appleBundleId", "googleLoginEnabled", "googleClientId", "googleAppName",
                  "userJWTExpiration", "freshAuthMinutes", "locales", "metaDataInvite", "settings-submit", "suspend-app", "delete-app"):
        if not op.has(ident):
            op.fail(f"the settings page has no #{ident}")
    if op.has("rpId"):
        op.fail("a CosyncAuth app's settings show the passkey relying party (#rpId)")

    # A value the API refuses: its message in #form-error, nothing saved.
    op.fill("userJWTExpiration", "0")
    op.submit("settings-submit", "settings-refused")
    error = op.text("form-error") if op.has("form-error") else ""
    if "userJWTExpiration must be between 1 and 8760" not in error:
        op.fail(f"userJWTExpiration 0 shows #form-error {error!r}, not the admin API's message")
    _, app = end_user.get_application(token)
    if not isinstance(app, dict) or app.get("userJWTExpiration") != 24:
        op.fail(f"a refused value was saved: getApplication {app!r:.200}")

    # Valid values: what getApplication then shows.
    op.get(f"/portal/apps/{app_id}/settings", "settings-form-again")
    op.fill("signupFlow", "none")
    for box in ("passwordFilter", "anonymousLoginEnabled", "userNamesEnabled"):
        if not op.el(box).is_selected():
            op.el(box).click()
    op.fill("passwordMinLength", "10")
    op.fill("userJWTExpiration", "12")
    op.fill("freshAuthMinutes", "20")
    op.fill("twoFactorVerification", "google")
    op.fill("locales", "EN, FR")
    op.fill("metaDataInvite", json.dumps([{"path": "invite.team", "fieldName": "team"}]))
    op.submit("settings-submit", "settings-saved")
    if op.has("form-error") and op.text("form-error"):
        op.fail(f"saving valid settings shows #form-error {op.text('form-error')!r}")

    def saved():
        status, app = end_user.get_application(token)
        ok = (status == 200 and isinstance(app, dict) and app.get("signupFlow") == "none" and app.get("passwordFilter") is True
              and app.get("passwordMinLength") == 10 and app.get("userJWTExpiration") == 12 and app.get("anonymousLoginEnabled") is True
              and app.get("userNamesEnabled") is True and app.get("twoFactorVerification") == "google"
              and app.get("locales") == ["EN", "FR"] and [f.get("path") for f in app.get("metaDataInvite", [])] == ["invite.team"])
        return ok, app
    wait_for(saved, "the saved settings do not show through getApplication")

    # Unticking a box turns the setting off.
    op.get(f"/portal/apps/{app_id}/settings", "settings-form-untick")
    op.el("anonymousLoginEnabled").click()
    op.submit("settings-submit", "settings-saved-untick")
    wait_for(lambda: (end_user.get_application(token)[1].get("anonymousLoginEnabled") is False, None),
             "unticking anonymousLoginEnabled does not show through getApplication")


def walk_emails(op, world):
    app_id = world["settings_app"][0]
    op.get(f"/portal/apps/{app_id}/emails", "emails")
    if not op.has("template-default"):
        op.fail("the signUp template of a new app is not marked as the built-in one (#template-default)")
    # Another template and locale through the GET form (no JavaScript needed).
    op.fill("template", "resetPassword")
    op.fill("locale", "FR")
    op.submit("template-open", "emails-resetPassword-FR")
    if "resetPassword (FR)" not in op.text("template-heading"):
        op.fail(f"opening resetPassword/FR shows {op.text('template-heading')!r}")

    # Preview: the courier's rendering, as text; nothing of it becomes markup in the Portal's page.
    op.fill("subject", "Reset for %APP_NAME%")
    op.fill("html", HOSTILE_TEMPLATE)
    op.submit("preview-template", "emails-preview")
    shown = op.text("preview-html") if op.has("preview-html") else ""
    if "Hello user@example.com" not in shown or '<img src=x onerror="alert(1)">' not in shown:
        op.fail(f"#preview-html shows {shown!r:.300} (expected the rendered template as text)")
    if op.driver.find_elements(By.CSS_SELECTOR, "#preview img, #preview script, main img"):
        op.fail("the preview put the template's markup into the Portal's page")
    if "Reset for Settings walk" not in (op.text("preview-subject") if op.has("preview-subject") else ""):
        op.fail("#preview-subject does not show the rendered subject")
    op.get(f"/portal/apps/{app_id}/emails?template=resetPassword&locale=FR", "emails-not-saved")
    if not op.has("template-default"):
        op.fail("a preview saved the template")

    # A refused save shows the API's message; a valid one is stored.
    op.fill("html", HOSTILE_TEMPLATE)
    op.fill("replyTo", "not-an-address")
    op.submit("save-template", "emails-refused")
    error = op.text("form-error") if op.has("form-error") else ""
    if "replyTo must be an e-mail address" not in error:
        op.fail(f"a bad replyTo shows #form-error {error!r}")
    op.fill("replyTo", "help@example.com")
    op.submit("save-template", "emails-saved")
    if op.has("template-default") or HOSTILE_TEMPLATE not in op.text("html"):
        op.fail("the saved template is not shown as the app's own")


def walk_keys_and_lifecycle(args, world, op, end_user, suffix):
    base = args.base
    app_id, token, secret, name = world["settings_app"]
    handle = f"settings-{suffix}@example.com"
    status, body = end_user.signup(token, handle, END_USER_PASSWORD)
    if status != 200:
        raise CheckFailed(f"end-user signup on the settings app: HTTP {status} {body[:200]}")

    # Keys: the JWKS link, then the secret rotated (shown once; the old one stops).
    op.get(f"/portal/apps/{app_id}/keys", "keys-settings-app")
    link = op.el("jwks-link").get_attribute("href")
    if not link.endswith(f"/apps/{app_id}/.well-known/jwks.json"):
        op.fail(f"#jwks-link points to {link!r}")
    old_kids = jwks_kids(base, app_id)
    fresh_submit(op, "rotate-secret-submit", "keys-secret-rotated")
    new_secret = op.text("app-secret") if op.has("app-secret") else ""
    if not new_secret.startswith("cas_"):
        op.fail(f"rotating the app secret shows #app-secret {new_secret!r}")
    elif secret and admin_status(base, app_id, secret) != 401:
        op.fail("the old app secret still opens the admin API after the rotation")
    elif admin_status(base, app_id, new_secret) != 200:
        op.fail("the new app secret does not open the admin API")
    op.get(f"/portal/apps/{app_id}/keys", "keys-after-secret")
    if op.has("app-secret"):
        op.fail("the app secret is shown a second time")

    # The RSA key: new tokens are signed with a new key; the old key stays in the JWKS.
    old_public = op.text("raw-public-key")
    fresh_submit(op, "rotate-rsa-submit", "keys-rsa-rotated", lambda: op.fill("retireAfterHours", "1"))
    if op.text("raw-public-key") == old_public:
        op.fail("#raw-public-key did not change after the RSA rotation")
    kids = jwks_kids(base, app_id)
    if len(kids) != 2 or not set(old_kids) <= set(kids):
        op.fail(f"the JWKS after the rotation has kids {kids} (before: {old_kids}): the old key should stay")
    status, body = login(base, token, handle)
    jwt = body.get("jwt") if isinstance(body, dict) else None
    if status != 200 or not jwt:
        op.fail(f"end-user login after the RSA rotation: HTTP {status} {str(body)[:200]}")
    else:
        signed_by = jwt_signers(base, app_id, jwt)
        if signed_by is not None and (not signed_by or set(signed_by) & set(old_kids)):
            op.fail(f"a JWT after the RSA rotation verifies with the keys {signed_by} (old {old_kids}, now {kids}): "
                    "expected the new key only")

    # Suspend: the end-user API refuses; activate: it serves again.
    op.get(f"/portal/apps/{app_id}/settings", "settings-lifecycle")
    op.submit("suspend-app-submit", "settings-suspended")
    if op.text("app-status") != "suspended" or not op.has("activate-app"):
        op.fail(f"after suspending, #app-status shows {op.text('app-status')!r}")
    status, body = login(base, token, handle)
    if status == 200 or not isinstance(body, dict) or body.get("code") != 402:
        op.fail(f"a suspended app's login answers HTTP {status} {str(body)[:200]} (expected 400 with code 402)")
    op.submit("activate-app-submit", "settings-activated")
    status, body = login(base, token, handle)
    if status != 200:
        op.fail(f"after activating, login answers HTTP {status} {str(body)[:200]}")

    # Delete: a wrong name deletes nothing; the app's name deletes it.
    fresh_submit(op, "delete-app-submit", "settings-delete-refused", lambda: op.fill("confirmName", name + " (not)"))
    if not op.has("form-error"):
        op.fail("deleting with a wrong name shows no #form-error")
    if end_user.get_application(token)[0] != 200:
        op.fail("a refused delete deleted the app")
    fresh_submit(op, "delete-app-submit", "apps-after-delete", lambda: op.fill("confirmName", name))
    if op.path() != "/portal" or name in op.apps_listed():
        op.fail(f"after deleting, the browser is at {op.path()} and the list shows {op.apps_listed()[:5]}")
    if end_user.get_application(token)[0] == 200:
        op.fail("the deleted app still answers getApplication")


def walk_editor(args, world):
    """The walk app's editor: settings yes; no rotation, delete or suspend controls, and forged POSTs answer 403."""
    app_id = world["app_id"]
    dev = Portal.signed_in("developer", args, world)
    try:
        dev.get(f"/portal/apps/{app_id}/settings", "settings-editor")
        if not dev.has("settings-submit"):
            dev.fail("an editor's settings page has no #settings-submit")
        for ident in ("delete-app", "suspend-app", "activate-app", "confirmName"):
            if dev.has(ident):
                dev.fail(f"an editor's settings page shows #{ident}")
        dev.get(f"/portal/apps/{app_id}/emails", "emails-editor")
        if not dev.has("save-template"):
            dev.fail("an editor's e-mail page has no #save-template")
        dev.get(f"/portal/apps/{app_id}/keys", "keys-editor")
        for ident in ("rotate-secret", "rotate-rsa"):
            if dev.has(ident):
                dev.fail(f"an editor's keys page shows #{ident}")
        if not dev.has("jwks-link"):
            dev.fail("the keys page has no #jwks-link")
        csrf = dev.page_csrf() or ""
        http = dev.http()
        for path, data in (("keys/rotate-secret", {}), ("keys/rotate-rsa", {"retireAfterHours": "1"}),
                           ("delete", {"confirmName": "x"}), ("status", {"status": "suspended"})):
            r = http.post(f"{args.base}/portal/apps/{app_id}/{path}", data=dict(data, csrf=csrf), allow_redirects=False, timeout=30)
            if r.status_code != 403:
                dev.fail(f"an editor's POST {path}: HTTP {r.status_code}, expected 403")
    finally:
        dev.quit()
        world["browsers"].remove(dev)


def fuzz_settings(args, world, op, suffix):
    """This slice's forms with hostile values (a valid session and csrf): never a 5xx. On an app of its own."""
    target, _ = op.create_app(f"Settings fuzz {suffix}")
    f = Fuzz(args, args.seed + 7)
    n = max(40, args.fuzz_cases // 4)
    base = args.base
    http = op.http()
    by_id = lambda ident: (lambda form: form["id"] == ident or ident in form["ids"])
    f.run_get("emails choice", http, f"/portal/apps/{target}/emails", ["template", "locale", "saved", "reset"], n // 2)
    f.run("settings (all fields)", http, f"{base}/portal/apps/{target}/settings", by_id("settings-submit"), n)
    f.run("e-mail template", http, f"{base}/portal/apps/{target}/emails", by_id("template-form"), n)
    f.run("app status", http, f"{base}/portal/apps/{target}/settings", by_id("suspend-app"), n // 2,
          fetch=lambda: http.get(f"{base}/portal/apps/{target}/settings", timeout=30))
    reauth(args, http, world["operator_auth"], world["operator_password"], f)
    f.run("rotate secret", http, f"{base}/portal/apps/{target}/keys", by_id("rotate-secret"), n // 4)
    f.run("rotate RSA key", http, f"{base}/portal/apps/{target}/keys", by_id("rotate-rsa"), 20)
    f.run("delete app", http, f"{base}/portal/apps/{target}/settings", by_id("delete-app"), n // 2)
    for failure in f.failures:
        Portal.failures.append(failure)
        log(f"FAIL {failure}")
