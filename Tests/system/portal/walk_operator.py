"""The Portal's operator slice in the browser (issue 23): the tenants view, the portal accounts (invite an operator,
suspend and activate the developer: its browser session ends at once), the developer's 404 on both, and the import
of a CosyncJWT export ZIP (made here by Tests/system/legacy/make_fixture.py and make_export_zip.py) through the file
input: the dry run's report, then the progress (the page refreshes itself) to done; the imported user then signs in
through the end-user API with its legacy password. Run by walk.py after the main walk (run(args, world)). Every
page: screenshot and axe (through Portal.get / Portal.submit). Then a fuzz of this slice's forms (no 5xx).
"""
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.parse

import requests

from selenium.common.exceptions import StaleElementReferenceException

from walk import CheckFailed, Fuzz, Portal, log, wait_for

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def run(args, world):
    op = Portal.signed_in("operator", args, world)
    try:
        walk_views(args, world, op)
        walk_import(args, world, op)
        if not args.no_fuzz:
            fuzz_operator(args, world, op)
    finally:
        op.quit()
        world["browsers"].remove(op)


def walk_views(args, world, op):
    op.get("/portal/tenants", "tenants")
    for ident in ("nav-tenants", "nav-accounts", "tenants", "q", "import-app"):
        if not op.has(ident):
            op.fail(f"the tenants page has no #{ident}")
    if world["app_id"] not in op.driver.page_source:
        op.fail("the walk app is not on the tenants page")
    op.fill("q", world["app_id"][:10])
    op.submit("#main form[role=search] button", "tenants-search")
    rows = op.driver.find_elements("css selector", "#tenants tbody tr")
    if len(rows) != 1 or world["app_id"] not in rows[0].text:
        op.fail(f"searching the tenants by appId prefix shows {len(rows)} rows")

    op.get("/portal/accounts", "accounts")
    dev_email = world["accounts"]["developer"][0]
    if dev_email not in op.driver.page_source:
        op.fail("the developer is not on the accounts page")
    op.fill("invite-email", f"operator2-{os.urandom(3).hex()}@portal.example.com")
    op.submit("invite-operator-submit", "accounts-invited")
    if not op.has("invite-link") or "/portal/invite/" not in op.text("invite-link"):
        op.fail("inviting an operator shows no #invite-link")

    # The developer: 404 for both views, and no links to them.
    dev = Portal.signed_in("developer", args, world)
    try:
        if dev.has("nav-tenants") or dev.has("nav-accounts"):
            dev.fail("a developer's navigation shows the operator views")
        dev.get("/portal/tenants", "tenants-developer", expect_status=404)
        dev.get("/portal/accounts", "accounts-developer", expect_status=404)

        # Suspend the developer: its next page is the sign-in page; then activate it again.
        op.get("/portal/accounts?q=" + urllib.parse.quote(dev_email), "accounts-search")
        op.submit(op.el("#accounts form.suspend-account button"), "account-suspended")
        if "suspended" not in op.text("#accounts .account-status"):
            op.fail("the suspended account does not show as suspended")
        dev.driver.get(args.base + "/portal")
        if dev.path() != "/portal/sign-in":
            dev.fail(f"a suspended account's session still works (on {dev.path()})")
        op.submit(op.el("#accounts form.activate-account button"), "account-activated")
        if "active" != op.text("#accounts .account-status"):
            op.fail("the activated account does not show as active")
    finally:
        dev.quit()
        world["browsers"].remove(dev)


def make_export(work):
    """A legacy fixture (three apps, nine bench users) and the export ZIP of its third app: (zip, appId,
    appToken, handle, password)."""
    fixture = os.path.join(work, "fixture")
    subprocess.run([sys.executable, os.path.join(ROOT, "Tests/system/legacy/make_fixture.py"), fixture, "--encrypt-key", "walk",
                    "--apps", "3", "--users", "9", "--pool-size", "3"], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(fixture, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    app = manifest["apps"][2]
    zip_path = os.path.join(work, "export.zip")
    subprocess.run([sys.executable, os.path.join(ROOT, "Tests/system/legacy/make_export_zip.py"), fixture, app["appId"], zip_path],
                   check=True, stdout=subprocess.DEVNULL)
    # Bench user i belongs to apps[i % 3]: user 2 is the third app's, with pool[2]'s password.
    return zip_path, app["appId"], app["appToken"], "user0000002@bench.example", manifest["bench"]["pool"][2]["password"]


def wait_phase(op, leaving, label):
    """Waits (the page refreshes itself) until the job's phase is not `leaving`; then settles (axe, screenshot)."""
    def moved():
        # The page reloads itself every 2 s while the job works: an element found just before a reload is
        # stale when read (this ended a CI run). Such a read counts as "not yet" and is tried again.
        try:
            phases = op.driver.find_elements("css selector", "#import-job")
            phase = phases[0].get_attribute("data-phase") if phases else None
        except StaleElementReferenceException:
            return False, "(the page reloaded while it was read)"
        return phase is not None and phase != leaving, phase
    try:
        wait_for(moved, f"the import stays {leaving}", timeout=120)
    except CheckFailed as error:
        op.fail(str(error))
    op.settle(label, reloads=True)


def walk_import(args, world, op):
    work = tempfile.mkdtemp(prefix="portal-import-")
    zip_path, app_id, app_token, handle, password = make_export(work)
    op.get("/portal/tenants", "tenants-before-import")
    op.submit("import-app", "import")
    for ident in ("import-upload", "export", "import-upload-submit"):
        if not op.has(ident):
            op.fail(f"the import page has no #{ident}")
    op.el("export").send_keys(zip_path)
    op.submit("import-upload-submit", "import-uploaded", reloads=True)
    wait_phase(op, "checking", "import-dry-run")
    if not op.has("import-summary") or not op.has("import-run-submit"):
        op.fail("the dry run shows no #import-summary or no #import-run-submit")
        return
    summary = op.text("import-summary")
    if "users" not in summary:
        op.fail(f"the dry run's report has no users row: {summary!r}")
    r = requests.post(f"{args.base}/api/appuser/login", headers={"app-token": app_token}, timeout=30,
                      data={"handle": handle, "password": hashlib.md5(password.encode()).hexdigest()})
    if r.status_code == 200:
        op.fail("the dry run imported the app already")
    op.submit("import-run-submit", "import-started", reloads=True)
    try:  # the running page reloads itself: its progress bar may be gone by the time it is read
        if op.has("import-progress"):
            bar = op.el("import-progress")
            log(f"import: progress {bar.get_attribute('value')} / {bar.get_attribute('max')}")
    except StaleElementReferenceException:
        log("import: the running page reloaded before its progress bar was read")
    wait_phase(op, "running", "import-done")
    if not op.has("import-done"):
        op.fail("the import did not end with #import-done" + (f": {op.text('import-failed')}" if op.has("import-failed") else ""))
    r = requests.post(f"{args.base}/api/appuser/login", headers={"app-token": app_token}, timeout=30,
                      data={"handle": handle, "password": hashlib.md5(password.encode()).hexdigest()})
    if r.status_code != 200:
        op.fail(f"the imported user cannot sign in with its legacy password: HTTP {r.status_code} {r.text[:200]}")
    # The imported app is a tenant now, with its users counted; its own import page is there too.
    op.get(f"/portal/tenants?q={app_id}", "tenants-after-import")
    if app_id not in op.driver.page_source:
        op.fail("the imported app is not on the tenants page")
    op.get(f"/portal/apps/{app_id}/import", "import-app-page")
    if not op.has("nav-import"):
        op.fail("the app navigation has no #nav-import")
    world["import_zip"] = zip_path


def fuzz_operator(args, world, op):
    """This slice's forms with hostile values (a valid session and csrf): never a 5xx."""
    f = Fuzz(args, args.seed + 11)
    n = max(40, args.fuzz_cases // 4)
    base = args.base
    http = op.http()
    by_id = lambda ident: (lambda form: form["id"] == ident or ident in form["ids"])
    f.run_get("tenants search", http, "/portal/tenants", ["q", "cursor"], n // 2)
    f.run_get("accounts search", http, "/portal/accounts", ["q", "after"], n // 2)
    f.run("invite operator", http, f"{base}/portal/accounts", by_id("invite-operator-submit"), n)
    # The upload: hostile multipart bodies and content types with the page's own csrf.
    rng = random.Random(args.seed + 12)
    page = http.get(f"{base}/portal/import", timeout=30)
    csrf = page.text.split('name="csrf" value="', 1)[-1].split('"', 1)[0]
    statuses = {}
    for i in range(n):
        boundary = rng.choice(["b", "x" * 70, "x" * 71, "", "--", "é", "a b"])
        part = bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 10, 300])))
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{csrf}\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"{rng.choice(['export', 'x', ''])}\"; filename=\"a.zip\"\r\n\r\n"
                ).encode("utf-8") + part + rng.choice([f"\r\n--{boundary}--\r\n".encode(), b"", b"\r\n--"])
        content_type = rng.choice([f"multipart/form-data; boundary={boundary}", f"multipart/form-data; boundary=\"{boundary}\"",
                                   "multipart/form-data", "application/x-www-form-urlencoded", "text/plain"])
        try:
            code = http.post(f"{base}/portal/import", data=body, headers={"Content-Type": content_type},
                             allow_redirects=False, timeout=60).status_code
        except requests.RequestException as error:
            code = type(error).__name__
        statuses[code] = statuses.get(code, 0) + 1
        if not isinstance(code, int) or code >= 500:
            f.failures.append(f"fuzz import upload: case {i} ({content_type!r}): {code}")
    log("fuzz import upload: " + ", ".join(f"{k}×{v}" for k, v in sorted(statuses.items(), key=lambda kv: str(kv[0]))))
    for failure in f.failures:
        Portal.failures.append(failure)
        log(f"FAIL {failure}")
