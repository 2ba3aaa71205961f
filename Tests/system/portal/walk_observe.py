"""The Portal's observe slice in the browser (issue 23): the overview's SVG charts, the audit log with its filters, the
outbox, and the webhook pages (add an endpoint, see a delivery and its attempts, replay it). Run by walk.py after the
main walk (run(args, world)).

Sign-ins and failures are made through the end-user API for world["app_id"] (the main walk's end user, found on the
users page); the overview must count them. The webhook endpoint points at a tiny receiver on 127.0.0.1 started here
(run.sh lets the server send to loopback over http: COSYNC_WEBHOOK_ALLOW_HTTP and COSYNC_WEBHOOK_ALLOW_CIDRS). Every
page: screenshot and axe (through Portal.get / Portal.submit). Then a fuzz of this slice's forms and filters (no 5xx).
"""
import datetime
import hashlib
import http.server
import json
import threading
import time

import requests
from selenium.webdriver.common.by import By

from walk import END_USER_PASSWORD, CheckFailed, Fuzz, Portal, forms_of, log, reauth, wait_for


class Receiver:
    """A webhook receiver on 127.0.0.1: answers 200 to every POST and keeps each message's webhook-id."""

    def __init__(self):
        received = self.received = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server name
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                received.append({"id": self.headers.get("webhook-id"), "body": body.decode("utf-8", "replace")})
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def ids(self):
        return [r["id"] for r in list(self.received)]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def today_row(browser):
    """The numbers of today's row of the overview's #activity table: (sign-ins, failures, lockouts, new users)."""
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    for row in browser.driver.find_elements(By.CSS_SELECTOR, "#activity tbody tr"):
        head = row.find_elements(By.CSS_SELECTOR, "th")
        if head and head[0].get_attribute("textContent").strip() == today:
            return [int(td.get_attribute("textContent").strip()) for td in row.find_elements(By.CSS_SELECTOR, "td")]
    raise CheckFailed(f"the overview's #activity table has no row for {today}")


def check_charts(browser):
    for chart in ("sign-ins", "failures", "lockouts", "new-users", "outbox"):
        found = browser.driver.find_elements(By.CSS_SELECTOR, f"svg#chart-{chart}")
        if not found:
            browser.fail(f"the overview has no svg#chart-{chart}")
            continue
        svg = found[0]
        label = (svg.get_attribute("aria-label") or "").strip()
        title = svg.find_elements(By.CSS_SELECTOR, "title")
        if svg.get_attribute("role") != "img" or not label or not title:
            browser.fail(f"svg#chart-{chart}: role {svg.get_attribute('role')!r}, aria-label {label!r}, {len(title)} <title>")
        if svg.get_attribute("style"):
            browser.fail(f"svg#chart-{chart} has a style attribute")


def find_end_user(op, app_id):
    """The main walk's end user (its handle), from the app's users page."""
    op.get(f"/portal/apps/{app_id}/users?q=end-user-", "observe-users")
    links = [a.text.strip() for a in op.driver.find_elements(By.CSS_SELECTOR, "#users a.user-link")]
    if not links:
        raise CheckFailed("the walk app's users page lists no end-user-… user to sign in as")
    return links[0]


def end_user_login(base, app_token, handle, password):
    r = requests.post(f"{base}/api/appuser/login", headers={"app-token": app_token}, timeout=30,
                      data={"handle": handle, "password": hashlib.md5(password.encode()).hexdigest()})
    return r.status_code


def run(args, world):
    base = args.base
    app_id = world["app_id"]
    receiver = Receiver()
    op = Portal.signed_in("operator", args, world)
    try:
        walk_observe(args, world, op, receiver, base, app_id)
        if not args.no_fuzz:
            fuzz_observe(args, world, op, receiver)
    finally:
        op.quit()
        world["browsers"].remove(op)
        receiver.stop()


def walk_observe(args, world, op, receiver, base, app_id):
    # The overview before: today's counts.
    op.get(f"/portal/apps/{app_id}", "observe-overview-before")
    check_charts(op)
    before = today_row(op)

    # The webhooks page: add an endpoint for sign-ins, pointing at the receiver; its secret is shown once.
    op.submit(op.el("nav-webhooks"), "observe-webhooks")
    op.fill("webhook-url", receiver.url)
    op.fill("webhook-description", "observe walk receiver")
    box = op.el("new-type-user-login-succeeded")
    if not box.is_selected():
        box.click()
    op.submit("webhook-create-submit", "observe-webhook-created")
    if op.has("form-error"):
        raise CheckFailed(f"adding the endpoint {receiver.url}: #form-error {op.text('form-error')!r}")
    secret = op.text("webhook-secret") if op.has("webhook-secret") else ""
    if not secret.startswith("whsec_"):
        op.fail(f"the new endpoint's page shows no secret once in #webhook-secret ({secret!r})" + op.once_cookie_note())
    endpoint_path = op.path()
    op.get(endpoint_path, "observe-webhook")
    if op.has("webhook-secret"):
        op.fail("the endpoint's secret is shown a second time")
    r = requests.get(f"{base}/admin/v1/apps/{app_id}/webhooks", headers={"Authorization": f"Bearer {args.operator_token}"}, timeout=30)
    urls = [w.get("url") for w in r.json().get("webhooks", [])] if r.status_code == 200 else []
    if receiver.url not in urls:
        op.fail(f"the admin API lists {urls} (HTTP {r.status_code}), not the endpoint added through the page")

    # Sign-ins and failures through the end-user API.
    handle = find_end_user(op, app_id)
    token = world["token2"]
    signed = sum(1 for _ in range(3) if end_user_login(base, token, handle, END_USER_PASSWORD) == 200)
    failed = sum(1 for _ in range(2) if end_user_login(base, token, handle, "Wrong-Passw0rd!") != 200)
    if signed != 3:
        op.fail(f"the end user {handle} signed in {signed} of 3 times with world['token2']")
    log(f"observe: {signed} sign-ins and {failed} failures of {handle}")

    # The overview counts them; its charts are labelled.
    op.get(f"/portal/apps/{app_id}", "observe-overview")
    check_charts(op)
    after = today_row(op)
    if after[0] - before[0] < signed or after[1] - before[1] < failed:
        op.fail(f"today's row went from {before} to {after} after {signed} sign-ins and {failed} failures")
    if not op.has("#figure-webhook-backlog svg[role=img]"):
        op.fail("the overview draws no webhook backlog chart though the app has an endpoint")

    # The delivery of a sign-in event: in the delivery log, on its own page with its attempts; then replayed.
    wait_for(lambda: (len(receiver.received) > 0, receiver.ids()), "the receiver got no webhook message", timeout=30)
    message_id = receiver.ids()[0]

    def delivered():
        op.get(endpoint_path, "observe-webhook-deliveries")
        rows = op.driver.find_elements(By.CSS_SELECTOR, "#deliveries tbody tr")
        return any(message_id in r.text and op.driver.find_elements(By.CSS_SELECTOR, "#deliveries form.replay-delivery") for r in rows), \
            [r.text for r in rows]
    wait_for(delivered, f"the delivery log does not show {message_id} delivered with a replay form", timeout=20)
    link = [a for a in op.driver.find_elements(By.CSS_SELECTOR, "#deliveries a.delivery-link") if message_id in a.text]
    if not link:
        raise CheckFailed(f"no a.delivery-link for {message_id}")
    op.submit(link[0], "observe-delivery")
    attempts = op.driver.find_elements(By.CSS_SELECTOR, "#attempts tbody tr")
    if not attempts:
        op.fail("the delivery page lists no attempt in #attempts")
    count = receiver.ids().count(message_id)
    form = op.el("form.replay-delivery")
    op.submit(form.find_element(By.CSS_SELECTOR, "button"), "observe-delivery-replayed")
    wait_for(lambda: (receiver.ids().count(message_id) > count, receiver.ids()),
             f"the replayed message {message_id} did not arrive again", timeout=30)
    log(f"observe: {message_id} delivered, replayed and delivered again")

    # The audit log: the endpoint's creation and the replay, by the operator; a filter by action.
    op.submit(op.el("nav-audit"), "observe-audit")
    op.fill("action", "webhook.*")
    op.submit("audit-filter", "observe-audit-filtered")
    actions = [c.text.strip() for c in op.driver.find_elements(By.CSS_SELECTOR, "#audit tbody tr td:nth-child(3)")]
    if "webhook.create" not in actions or "webhook.replay" not in actions or any(not a.startswith("webhook.") for a in actions):
        op.fail(f"the audit log filtered by webhook.* shows {actions}")
    op.fill("user", "not-a-uuid")
    op.submit("audit-filter", "observe-audit-bad-filter")
    if not op.has("form-error"):
        op.fail("an invalid user id filter shows no #form-error")

    # The outbox: the table, and no message contents.
    op.submit(op.el("nav-outbox"), "observe-outbox")
    op.el("outbox")

    # A developer (the walk app's editor) sees the pages too.
    dev = Portal.signed_in("developer", args, world)
    try:
        dev.get(endpoint_path, "observe-webhook-editor")
        if dev.has("delete-webhook"):
            dev.fail("an editor's endpoint page offers the delete form (owners only)")
        if dev.has("rotate-webhook-secret"):
            dev.fail("an editor's endpoint page offers the secret rotation (owners and operators only)")
        if not dev.has("edit-webhook"):
            dev.fail("an editor's endpoint page lacks the edit form")
        dev.get(f"/portal/apps/{app_id}/audit", "observe-audit-editor")
        # The editor has no delete form to take a token from: a token of another form is refused too.
        r = dev.http().post(base + endpoint_path + "/delete", data={"csrf": dev.page_csrf() or ""}, allow_redirects=False, timeout=30)
        if r.status_code != 403:
            dev.fail(f"an editor's POST to delete the endpoint: HTTP {r.status_code}, expected 403")
        r = dev.http().post(base + endpoint_path + "/rotate-secret", data={"csrf": dev.page_csrf() or ""}, allow_redirects=False, timeout=30)
        if r.status_code != 403:
            dev.fail(f"an editor's POST to rotate the endpoint's secret: HTTP {r.status_code}, expected 403")
        r = dev.http().post(base + endpoint_path + "/disable", data={"x": "1"}, allow_redirects=False, timeout=30)
        if r.status_code != 403:
            dev.fail(f"a CSRF-less POST to disable the endpoint: HTTP {r.status_code}, expected 403")
    finally:
        dev.quit()
        world["browsers"].remove(dev)
    world["observe_endpoint"] = endpoint_path


def fuzz_observe(args, world, op, receiver):
    """This slice's forms and filters with hostile values (a valid session and csrf): never a 5xx."""
    base = args.base
    app_id = world["app_id"]
    f = Fuzz(args, args.seed + 23)
    n = max(40, args.fuzz_cases // 4)
    http = op.http()
    by_id = lambda ident: (lambda form: form["id"] == ident or ident in form["ids"])
    f.run_get("audit filters", http, f"/portal/apps/{app_id}/audit", ["action", "actor", "user", "from", "to", "cursor"], n)
    f.run_get("outbox filter", http, f"/portal/apps/{app_id}/outbox", ["to", "cursor"], n // 2)
    endpoint = world["observe_endpoint"]
    f.run_get("delivery log", http, endpoint, ["cursor", "saved"], n // 2)
    f.run("replay", http, base + endpoint, lambda form: "replay-delivery" in form["class"].split(), n // 2)
    # The endpoint forms on a throwaway app (the fuzz adds endpoints up to the app's limit).
    target, _ = op.create_app(f"Observe fuzz {str(int(time.time()))[-6:]}")
    page = f"{base}/portal/apps/{target}/webhooks"
    r = http.get(page, timeout=30)
    csrf = next((v for form in forms_of(r.text) if "webhook-create-submit" in form["ids"]
                 for k, v in form["fields"] if k == "csrf"), "")
    made = http.post(page, data={"csrf": csrf, "url": receiver.url, "type:user.created": "1"}, allow_redirects=False, timeout=30)
    if made.status_code != 303:
        f.failures.append(f"fuzz: adding an endpoint to {target} answered {made.status_code}")
    else:
        hook = base + made.headers["Location"]
        f.run("webhook create", http, page, by_id("webhook-create-submit"), n)
        # Disable first: the edit's cases may disable the endpoint, and a disabled endpoint has no disable form.
        f.run("webhook disable", http, hook, by_id("webhook-disable-submit"), n // 4)
        f.run("webhook edit", http, hook, by_id("webhook-save-submit"), n)
        reauth(args, http, world["operator_auth"], world["operator_password"], f)
        f.run("webhook rotate secret", http, hook, by_id("webhook-rotate-submit"), n // 4)
        f.run("webhook delete", http, hook, by_id("webhook-delete-submit"), n // 4)
    for failure in f.failures:
        Portal.failures.append(failure)
        log(f"FAIL {failure}")
