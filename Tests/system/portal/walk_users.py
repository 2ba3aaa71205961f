"""The users pages in the browser (issue 23, "Users" and "Pending signups and invites"), after the main walk.

The operator makes an app of its own (signup flow `none`, so an end user's signup through the end-user API signs in
at once) and an end user with two sessions. It searches the users by handle, by user name... by the user id, opens
the user page (sessions, identities), and then: suspend (the login is refused, the tokens stop), activate (the login
works), set a password (a weak one shows the app's rule in #form-error; a good one logs in, the old one no longer),
sign out everywhere (every token answers 405 from getUser), detach the last identity (refused with the service's
message), delete (the box ticked, after a fresh sign-in when asked; the login then fails).
The developer (editor of the walk app, whose signup flow is `code`) sees a signup waiting on the pending page,
invites an end user, sends the invitation again and cancels both; its user page has the actions but no delete form.
Every page: axe, a screenshot, the headers (Portal.get / submit). Then a fuzz of the new forms: no 5xx.
"""
import hashlib
import os
import re
import urllib.parse

import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from walk import END_USER_PASSWORD, CheckFailed, EndUser, Fuzz, Portal, forms_of, log, reauth, wait_for


def login_status(base, app_token, handle, password):
    """The end-user login's HTTP status and legacy code (200 and None when it works)."""
    r = requests.post(f"{base}/api/appuser/login", headers={"app-token": app_token}, timeout=30,
                      data={"handle": handle, "password": hashlib.md5(password.encode()).hexdigest()})
    try:
        code = r.json().get("code") if r.status_code != 200 else None
    except ValueError:
        code = None
    return r.status_code, code


def submit_form(b, form_id, label):
    b.submit(b.el(f"#{form_id} button[type=submit]", f"the submit button of #{form_id}"), label)


def notice(b):
    found = b.driver.find_elements(By.CSS_SELECTOR, "main [role=status]")
    return found[0].text.strip() if found else ""


def run(args, world):
    base = args.base
    end_user = EndUser(base)
    suffix = os.urandom(3).hex()

    # --- the operator: an app of its own and an end user -------------------------------------------------
    op = Portal.signed_in("operator", args, world)
    app_name = f"Users app {suffix}"
    app_id, token = op.create_app(app_name)
    op.get(f"/portal/apps/{app_id}/settings", "users-app-settings")
    op.fill("signupFlow", "none")
    op.submit("settings-submit", "users-app-settings-saved")
    wait_for(lambda: (lambda r: (r[0] == 200 and isinstance(r[1], dict) and r[1].get("signupFlow") == "none", r))(
        end_user.get_application(token)), "the users app's signup flow `none` does not show through getApplication")
    handle = f"user-page-{suffix}@example.com"
    status, body = end_user.signup(token, handle, END_USER_PASSWORD)
    if status != 200 or "access-token" not in body:
        raise CheckFailed(f"end-user signup on the users app: HTTP {status} {body[:300]}")
    first = end_user.login(token, handle, END_USER_PASSWORD)
    second = end_user.login(token, handle, END_USER_PASSWORD)

    # Search: by handle, then by the user id (read on the user page).
    op.get(f"/portal/apps/{app_id}/users", "users-empty-search")
    op.fill("q", handle[:14])
    op.el("q").send_keys(Keys.ENTER)
    wait_for(lambda: ("q=" in op.driver.current_url, op.driver.current_url), "the users search did not load")
    op.settle("users-search-handle")
    links = [a for a in op.driver.find_elements(By.CSS_SELECTOR, "#users a.user-link") if a.text.strip() == handle]
    if len(links) != 1:
        raise CheckFailed(f"searching the users for {handle[:14]!r} shows {[a.text for a in op.driver.find_elements(By.CSS_SELECTOR, '#users a.user-link')]}")
    op.submit(links[0], "user-page")
    user_path = op.path()
    user_id = op.text("user-id")
    if not re.fullmatch(r"[0-9a-f-]{36}", user_id):
        op.fail(f"#user-id shows {user_id!r}")
    op.get(f"/portal/apps/{app_id}/users?q={urllib.parse.quote(user_id.upper())}", "users-search-id")
    found = [a.text.strip() for a in op.driver.find_elements(By.CSS_SELECTOR, "#users a.user-link")]
    if found != [handle]:
        op.fail(f"searching the users by id {user_id} shows {found}")

    # The user page: sessions, identities, the actions.
    op.get(user_path, "user-page")
    for ident in ("sessions", "identities", "user-suspend", "user-set-password", "newPassword", "user-sign-out-everywhere",
                  "user-delete"):
        if not op.has(ident):
            op.fail(f"the operator's user page has no #{ident}")
    shown = len(op.driver.find_elements(By.CSS_SELECTOR, "#sessions form.revoke-session"))
    if shown != 3:
        op.fail(f"the user page shows {shown} sessions, not the user's 3 (the signup's and two logins)")
    kinds = [td.text.strip() for td in op.driver.find_elements(By.CSS_SELECTOR, "#identities tbody tr td:first-child")]
    if kinds != ["password"]:
        op.fail(f"the identities table shows {kinds}, expected ['password']")

    # Suspend: the login is refused and the tokens stop; activate: the login works again.
    submit_form(op, "user-suspend", "user-suspended")
    if op.text("user-status") != "suspended" or not notice(op):
        op.fail(f"after suspending, #user-status shows {op.text('user-status')!r} (notice {notice(op)!r})")
    status, code = login_status(base, token, handle, END_USER_PASSWORD)
    if status == 200:
        op.fail("a suspended user's login answers 200")
    if end_user.get_user(first) == 200:
        op.fail("a suspended user's access token still answers getUser 200")
    submit_form(op, "user-activate", "user-activated")
    if op.text("user-status") != "active":
        op.fail(f"after activating, #user-status shows {op.text('user-status')!r}")
    if login_status(base, token, handle, END_USER_PASSWORD)[0] != 200:
        op.fail("an activated user's login does not answer 200")

    # Set a password: the app's rule (a weak one) and then a good one.
    new_password = "Portal-Set-Passw0rd!" + suffix
    op.get(user_path, "user-page")
    op.fill("newPassword", "x")
    submit_form(op, "user-set-password", "user-password-result")
    if op.has("form-error"):
        log(f"a one-letter password: {op.text('form-error')!r}")
        op.fill("newPassword", new_password)
        submit_form(op, "user-set-password", "user-password-set")
    else:
        # The app has no password rule: "x" was set; set the real one.
        op.fill("newPassword", new_password)
        submit_form(op, "user-set-password", "user-password-set")
    if op.has("form-error"):
        op.fail(f"setting a good password shows #form-error {op.text('form-error')!r}")
    if login_status(base, token, handle, new_password)[0] != 200:
        op.fail("the password set in the Portal does not log in")
    if login_status(base, token, handle, END_USER_PASSWORD)[0] == 200:
        op.fail("the old password still logs in after the Portal set a new one")

    # Sign out everywhere: every session's token answers 405.
    third = end_user.login(token, handle, new_password)
    fourth = end_user.login(token, handle, new_password)
    op.get(user_path, "user-page")
    submit_form(op, "user-sign-out-everywhere", "user-signed-out-everywhere")
    wait_for(lambda: (lambda a: (a == [405, 405], a))([end_user.get_user(third), end_user.get_user(fourth)]),
             "after sign out everywhere, getUser does not answer 405 for both tokens")
    if op.driver.find_elements(By.CSS_SELECTOR, "#sessions form.revoke-session"):
        op.fail("the user page still lists sessions after sign out everywhere")
    if end_user.get_user(second) == 200:
        op.fail("a token from before the suspension answers getUser 200")
    log("suspend, activate, set password, sign out everywhere: checked through the end-user API")

    # Detach the last identity: refused with the service's message.
    forms = op.driver.find_elements(By.CSS_SELECTOR, "#identities form.detach-identity")
    if len(forms) != 1:
        op.fail(f"the identities table has {len(forms)} form.detach-identity (1 expected)")
    else:
        op.submit(forms[0].find_element(By.CSS_SELECTOR, "button"), "user-detach-last")
        error = op.text("form-error") if op.has("form-error") else ""
        if "last" not in error:
            op.fail(f"detaching the last identity shows #form-error {error!r}")
        if login_status(base, token, handle, new_password)[0] != 200:
            op.fail("a refused detach stopped the password login")

    # The fuzz target: a second end user of the operator's app.
    fuzz_handle = f"user-fuzz-{suffix}@example.com"
    end_user.signup(token, fuzz_handle, END_USER_PASSWORD)

    # Inviting a handle that is a user already: the service's refusal in #form-error.
    op.get(f"/portal/apps/{app_id}", "users-app-overview")
    op.submit(op.el("nav-pending"), "pending-operator")
    op.fill("inviteHandle", fuzz_handle)
    submit_form(op, "invite-user", "pending-invite-refused")
    if not (op.has("form-error") and "exists" in op.text("form-error")):
        op.fail(f"inviting an existing user's handle shows #form-error {op.text('form-error') if op.has('form-error') else None!r}")

    # Delete (the operator is an owner): tick the box, a fresh sign-in when asked; the login then fails.
    op.get(user_path, "user-page")
    op.el("user-delete-confirm").click()
    submit_form(op, "user-delete", "user-delete")
    if op.path().startswith("/portal/reauth"):
        op.reauth_here()
        op.el("user-delete-confirm").click()
        submit_form(op, "user-delete", "user-delete")
    if op.path() != f"/portal/apps/{app_id}/users" or not notice(op):
        op.fail(f"after deleting, the browser is on {op.path()} (notice {notice(op)!r})")
    if login_status(base, token, handle, new_password)[0] == 200:
        op.fail("a deleted user still logs in")
    r = op.http().get(base + user_path, allow_redirects=False, timeout=30)
    if r.status_code != 404:
        op.fail(f"the deleted user's page answers {r.status_code}, expected 404")
    log("user deleted; the login fails")
    world["users_app"] = (app_id, token, fuzz_handle)
    op_http = op.http()
    op.quit()
    world["browsers"].remove(op)

    # --- the developer (editor of the walk app): pending signups and invites ------------------------------
    dev = Portal.signed_in("developer", args, world)
    walk_app = world["app_id"]
    waiting = f"waiting-{suffix}@example.com"
    status, body = end_user.signup(world["token2"], waiting, END_USER_PASSWORD)
    if status != 200:
        dev.fail(f"a signup under the code flow answers {status} {body[:200]!r}")
    dev.get(f"/portal/apps/{walk_app}", "overview")
    dev.submit(dev.el("nav-pending"), "pending")
    rows = [tr.text for tr in dev.driver.find_elements(By.CSS_SELECTOR, "#signups tbody tr")]
    if not any(waiting in row for row in rows):
        dev.fail(f"the pending page does not list the signup of {waiting} in #signups ({rows})")
    invitee = f"invitee-{suffix}@example.com"
    dev.fill("inviteHandle", invitee)
    submit_form(dev, "invite-user", "pending-invited")
    rows = [tr for tr in dev.driver.find_elements(By.CSS_SELECTOR, "#invites tbody tr") if invitee in tr.text]
    if len(rows) != 1:
        raise CheckFailed(f"after inviting {invitee}, #invites shows {len(rows)} rows for it")
    resend = rows[0].find_elements(By.CSS_SELECTOR, "form.resend-invite button")
    if not resend:
        dev.fail("the invitation has no form.resend-invite")
    else:
        dev.submit(resend[0], "pending-resent")
        if len([tr for tr in dev.driver.find_elements(By.CSS_SELECTOR, "#invites tbody tr") if invitee in tr.text]) != 1:
            dev.fail("sending the invitation again made a second row")
    row = next(tr for tr in dev.driver.find_elements(By.CSS_SELECTOR, "#invites tbody tr") if invitee in tr.text)
    dev.submit(row.find_element(By.CSS_SELECTOR, "form.cancel-invite button"), "pending-invite-cancelled")
    if any(invitee in tr.text for tr in dev.driver.find_elements(By.CSS_SELECTOR, "#invites tbody tr")):
        dev.fail("the cancelled invitation is still listed")
    row = next((tr for tr in dev.driver.find_elements(By.CSS_SELECTOR, "#signups tbody tr") if waiting in tr.text), None)
    if row is not None:
        dev.submit(row.find_element(By.CSS_SELECTOR, "form.cancel-signup button"), "pending-signup-cancelled")
        if any(waiting in tr.text for tr in dev.driver.find_elements(By.CSS_SELECTOR, "#signups tbody tr")):
            dev.fail("the cancelled signup is still listed")

    # An editor's user page: the actions, but no delete.
    dev.get(world["user_path"], "user-editor")
    for ident in ("user-suspend", "user-set-password", "user-sign-out-everywhere"):
        if not dev.has(ident):
            dev.fail(f"an editor's user page has no #{ident}")
    if dev.has("user-delete"):
        dev.fail("an editor's user page offers #user-delete (owners only)")
    csrf = dev.page_csrf()
    r = dev.http().post(base + world["user_path"] + "/delete", data={"csrf": csrf or "", "confirm": "yes"}, allow_redirects=False,
                        timeout=30)
    if r.status_code != 403:
        dev.fail(f"an editor's forged delete: HTTP {r.status_code}, expected 403")
    r = dev.http().post(base + world["user_path"] + "/suspend", data={"status": "suspended"}, allow_redirects=False, timeout=30)
    if r.status_code != 403:
        dev.fail(f"a suspend without csrf: HTTP {r.status_code}, expected 403")
    if end_user.get_user(world["live_access"]) != 200:
        dev.fail("the refused POSTs changed the walk's end user")
    dev_http = dev.http()
    dev.quit()
    world["browsers"].remove(dev)

    # The viewer, when the main walk left its requests session: no forms, forged POSTs 403.
    viewer = world.get("viewer_http")
    if viewer is not None:
        for path in (world["user_path"], f"/portal/apps/{walk_app}/pending"):
            r = viewer.get(base + path, allow_redirects=False, timeout=30)
            posts = [f for f in forms_of(r.text) if f["method"] == "post" and f["id"] != "sign-out"]
            if r.status_code != 200 or posts:
                Portal.failures.append(f"[viewer] {path}: HTTP {r.status_code}, post forms {[f['action'] for f in posts]}")
            sign_out = next((f for f in forms_of(r.text) if f["id"] == "sign-out"), None)
            csrf = dict(sign_out["fields"]).get("csrf") if sign_out else ""
            for action in ("/suspend", "/sign-out-everywhere") if path == world["user_path"] else ("/invite",):
                r = viewer.post(base + path + action, data={"csrf": csrf, "handle": "forged@example.com"}, allow_redirects=False,
                                timeout=30)
                if r.status_code != 403:
                    Portal.failures.append(f"[viewer] forged POST {path}{action}: HTTP {r.status_code}, expected 403")

    # --- the fuzz of the new forms ------------------------------------------------------------------------
    if args.no_fuzz:
        return
    f = Fuzz(args, args.seed + 7)
    n = max(30, args.fuzz_cases // 4)
    status, body = end_user.signup(token, f"fuzz-signed-{suffix}@example.com", END_USER_PASSWORD)
    op_http.get(f"{base}/portal/apps/{app_id}/users?q={urllib.parse.quote(fuzz_handle)}", timeout=30)
    page = op_http.get(f"{base}/portal/apps/{app_id}/users?q={urllib.parse.quote(fuzz_handle)}", timeout=30)
    found = re.search(r'href="(/portal/apps/[0-9a-f]+/users/[0-9a-f-]{36})"', page.text)
    if not found:
        Portal.failures.append(f"fuzz users: the fuzz user {fuzz_handle} is not found by the search")
        return
    fuzz_user = base + found.group(1)
    by_id = lambda ident: (lambda form: form["id"] == ident or ident in form["ids"])
    by_class = lambda name: (lambda form: name in form["class"].split())
    f.run_get("users search (ids)", op_http, f"/portal/apps/{app_id}/users", ["q", "cursor", "deleted"], n // 2)
    f.run_get("user page", op_http, found.group(1), ["done", "revoked"], n // 3)
    f.run_get("pending", dev_http, f"/portal/apps/{walk_app}/pending", ["signupsCursor", "invitesCursor", "done", "handle"], n // 2)
    f.run("user set password", op_http, fuzz_user, by_id("user-set-password"), n)
    f.run("user sign out everywhere", op_http, fuzz_user, by_id("user-sign-out-everywhere"), n // 2)
    f.run("user suspend", op_http, fuzz_user, by_id("user-suspend"), n // 3)
    f.run("user activate", op_http, fuzz_user, by_id("user-activate"), n // 3)
    f.run("detach identity", op_http, fuzz_user, by_class("detach-identity"), n // 3)
    f.run("pending invite", dev_http, f"{base}/portal/apps/{walk_app}/pending", by_id("invite-user"), n)
    reauth(args, op_http, world["accounts"]["operator"][2], world["accounts"]["operator"][1], f)
    f.run("user delete", op_http, fuzz_user, by_id("user-delete"), n // 2)
    Portal.failures.extend(f.failures[:30])
    if len(f.failures) > 30:
        Portal.failures.append(f"... and {len(f.failures) - 30} more fuzz failures (users)")
