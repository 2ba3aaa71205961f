"""The Portal in a real browser (issue 23): Debian's Chromium, headless, driven by Selenium through the pages of
/portal on a live port, black-box. Started by run.sh, which starts the server (public URL http://localhost:<port>)
and makes the first operator's invite with `cosyncauth portal-operator --email …`.

The walk (each account in a browser profile of its own):
  1. The operator accepts its invite (sets a password, enrols TOTP from the key the page shows in #totp-key; codes
     computed here, RFC 6238), signs out and signs in again with password + TOTP. It creates the walk app (reads
     #app-token once), an app no developer is given, and a fuzz target app; sets the walk app's signup flow to
     `none` (so an end user's signup signs in at once). An end user signs up through the end-user API (a
     session). The operator proves itself again (/portal/reauth), rotates the app token with no grace (the new
     one shown once in #app-token), and the old token stops (GET /api/appuser/getApplication) while the new one
     works. It invites a developer as editor and a viewer (the links are read from #invite-link: an operator's
     members page shows it; an owner's only says the e-mail went out).
  2. (The end user's signup is part of 1.)
  3. The developer accepts, enrols TOTP, adds a passkey on /portal/account (Chromium's virtual authenticator),
     signs out and signs in with the passkey (#passkey-sign-in, no e-mail typed); sees only its app; sets the signup flow to `code` and adds a
     metadata field (a refused field first: the API's message in #form-error); a new signup through the end-user
     API then waits for its code. Its keys page has no rotate form and its forged rotation answers 403 (keys are
     the owners'). The end user logs in again (a second session); the developer finds the user and revokes one
     session: that token answers 405 from /api/appuser/getUser, the other still 200.
  4. Refusals: the viewer's pages have no change controls and its forged POSTs (its cookie, a valid csrf from
     another page) answer 403 and change nothing; a POST without csrf (or with a wrong one) answers 403; the
     developer gets 404 for the app it has no role on (and for an app that does not exist).
  5. Every page: axe-core (0 serious or critical violations), a screenshot in --artifacts, <main id="main">, an
     <h1>, nav#nav; the response headers (CSP script-src 'self' and frame-ancestors 'none', X-Frame-Options DENY,
     Cache-Control no-store, Referrer-Policy no-referrer); no CSP violation in the console; the server time
     (Navigation Timing) is printed per page.
  6. A fuzz of every form with a signed-in cookie and valid csrf tokens (and of the sign-in, code, invite and
     enrolment forms with their own pre-session cookies): a few hundred hostile values per form, no 5xx.

Exit status 0 when every check passed; each failure is printed with the page it happened on.
"""
import argparse
import importlib
import base64
import hashlib
import hmac
import html.parser
import json
import os
import random
import re
import shutil
import struct
import sys
import time
import traceback
import urllib.parse

import requests
from selenium import webdriver
from selenium.common.exceptions import JavascriptException, TimeoutException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.virtual_authenticator import VirtualAuthenticatorOptions
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

PASSWORD_LENGTH_OK = "Portal-Walk-Passw0rd!"
END_USER_PASSWORD = "End-User-Passw0rd!"
METADATA_OK = [{"path": "user.company", "fieldName": "company", "required": False, "canEdit": True}]
METADATA_REFUSED = [{"path": "sub", "fieldName": "subject"}]   # a registered claim: the admin API refuses it
CHANGE_CONTROLS = ["#settings-submit", "#rotate-token", "#rotate-token-submit", "#invite-email", "#invite-role",
                   "#invite-submit", "form.revoke-session", "#new-app", "#create-app-submit"]


class CheckFailed(Exception):
    pass


def log(message):
    print(f"portal: {message}", flush=True)


# --- TOTP (RFC 6238: HMAC-SHA1, 6 digits, 30 s) ---------------------------------------------------------

def totp_at(key_text, step):
    letters = re.sub(r"[^A-Za-z2-7]", "", key_text).upper()
    key = base64.b32decode(letters + "=" * (-len(letters) % 8))
    digest = hmac.new(key, struct.pack(">Q", step), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    number = struct.unpack(">I", digest[offset:offset + 4])[0] & 0x7FFFFFFF
    return f"{number % 1_000_000:06d}"


class Authenticator:
    """One account's authenticator app. The server takes a step within ±1 of now and each step once per
    account, so each code is for the step after the last one used: the current one, or the next one (which
    the server already accepts); it waits only when even that is spent."""

    def __init__(self, key_text):
        self.key = key_text
        self.last = -1

    def code(self):
        while True:
            now = int(time.time() // 30)
            target = max(self.last + 1, now)
            if target <= now + 1:
                self.last = target
                return totp_at(self.key, target)
            time.sleep(30 - time.time() % 30 + 0.3)


# --- the end-user API (requests, straight to the port) ----------------------------------------------------

class EndUser:
    def __init__(self, base):
        self.base = base

    def get_application(self, app_token):
        r = requests.get(f"{self.base}/api/appuser/getApplication", headers={"app-token": app_token}, timeout=30)
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, r.text

    def signup(self, app_token, handle, password):
        r = requests.post(f"{self.base}/api/appuser/signup", headers={"app-token": app_token}, timeout=30,
                          data={"handle": handle, "password": hashlib.md5(password.encode()).hexdigest()})
        return r.status_code, r.text

    def login(self, app_token, handle, password):
        r = requests.post(f"{self.base}/api/appuser/login", headers={"app-token": app_token}, timeout=30,
                          data={"handle": handle, "password": hashlib.md5(password.encode()).hexdigest()})
        if r.status_code != 200:
            raise CheckFailed(f"end-user login of {handle}: HTTP {r.status_code} {r.text[:300]}")
        return r.json()["access-token"]

    def get_user(self, access_token):
        """200, or the legacy error code of a 400 answer (405: the token's session has ended), or the HTTP status."""
        r = requests.get(f"{self.base}/api/appuser/getUser", headers={"access-token": access_token}, timeout=30)
        if r.status_code == 400:
            try:
                return int(r.json()["code"])
            except (ValueError, KeyError, TypeError):
                pass
        return r.status_code


# --- forms in HTML (for requests) -------------------------------------------------------------------------

class FormParser(html.parser.HTMLParser):
    """Every <form> of a page: id, class, action, method and its named fields with their current values."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.forms = []
        self.form = None
        self.select = None
        self.textarea = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.form = {"id": a.get("id"), "class": a.get("class") or "", "action": a.get("action") or "",
                         "method": (a.get("method") or "get").lower(), "fields": [], "ids": []}
            self.forms.append(self.form)
            return
        if self.form is None:
            return
        if a.get("id"):
            self.form["ids"].append(a["id"])
        if tag == "input" and a.get("name"):
            kind = (a.get("type") or "text").lower()
            if kind in ("submit", "button", "image", "reset"):
                return
            if kind in ("checkbox", "radio") and "checked" not in a:
                return
            self.form["fields"].append([a["name"], a.get("value") or ""])
        elif tag == "select" and a.get("name"):
            self.select = [a["name"], None]
            self.form["fields"].append(self.select)
        elif tag == "option" and self.select is not None:
            if self.select[1] is None or "selected" in a:
                self.select[1] = a.get("value") or ""
        elif tag == "textarea" and a.get("name"):
            self.textarea = [a["name"], ""]
            self.form["fields"].append(self.textarea)

    def handle_data(self, data):
        if self.textarea is not None:
            self.textarea[1] += data

    def handle_endtag(self, tag):
        if tag == "form":
            self.form = None
        elif tag == "select":
            if self.select is not None and self.select[1] is None:
                self.select[1] = ""
            self.select = None
        elif tag == "textarea":
            self.textarea = None


def forms_of(page_html):
    parser = FormParser()
    parser.feed(page_html)
    return parser.forms


# --- the browser ------------------------------------------------------------------------------------------

class Portal:
    """One Chromium profile (one portal account) on the Portal."""

    pages = []          # (screenshot, url, server ms, axe violations) of every page, for the summary
    failures = []
    counter = [0]

    def __init__(self, who, args):
        self.who = who
        self.args = args
        self.base = args.base
        self.auth = None
        self.password = None
        self.email = None
        options = webdriver.ChromeOptions()
        options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                         "--window-size=1280,900", "--no-first-run", "--disable-extensions",
                         "--disable-background-networking", "--lang=en-US", "--password-store=basic"):
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
        self.driver = webdriver.Chrome(options=options, service=Service(driver_path))
        self.driver.set_page_load_timeout(30)

    def quit(self):
        try:
            self.driver.quit()
        except WebDriverException:
            pass

    def fail(self, message):
        Portal.failures.append(f"[{self.who}] {message}\n    at {self.driver.current_url}")
        log(f"FAIL [{self.who}] {message}")

    # -- navigation --
    def get(self, path, label, expect_status=200):
        url = path if path.startswith("http") else self.base + path
        self.driver.get(url)
        self.settle(label)
        self.check_headers(url, expect_status)

    def settle(self, label, reloads=False):
        """After a navigation: the page's structure, axe-core, a screenshot, the console, the timing.

        `reloads`: the page reloads itself (an import at work sends `Refresh: 2`), so a reload may land in the
        middle of these checks: an element goes stale, or axe-core's script is cut off. Such an attempt is
        dropped with what it recorded, and the checks run again on the reloaded page (up to 4 times)."""
        if not reloads:
            return self._settle(label)
        for attempt in range(4):
            before = len(Portal.failures)
            try:
                name = self._settle(label)
            except WebDriverException:
                if attempt == 3:
                    raise
                del Portal.failures[before:]
                time.sleep(0.3)
                continue
            if attempt < 3 and any("axe-core could not run" in f for f in Portal.failures[before:]):
                del Portal.failures[before:]
                time.sleep(0.3)
                continue
            return name

    def _settle(self, label):
        try:
            WebDriverWait(self.driver, 20, poll_frequency=0.1).until(
                lambda d: d.execute_script("return document.readyState") == "complete")
        except TimeoutException:
            raise CheckFailed(f"{label}: the page did not finish loading") from None
        Portal.counter[0] += 1
        name = f"{Portal.counter[0]:02d}-{self.who}-{label}"
        os.makedirs(self.args.artifacts, exist_ok=True)
        shot = os.path.join(self.args.artifacts, name + ".png")
        self.driver.save_screenshot(shot)
        with open(os.path.join(self.args.artifacts, name + ".html"), "w", encoding="utf-8") as f:
            f.write(self.driver.page_source)
        d = self.driver
        if not d.find_elements(By.CSS_SELECTOR, "main#main"):
            self.fail(f"{label}: no <main id=\"main\">")
        if not d.find_elements(By.TAG_NAME, "h1"):
            self.fail(f"{label}: no <h1>")
        if not d.find_elements(By.ID, "nav"):
            self.fail(f"{label}: no element id=\"nav\"")
        violations = self.accessibility(label)
        try:
            timing = d.execute_script(
                "var n = performance.getEntriesByType('navigation')[0];"
                "return n ? Math.round((n.responseStart - n.requestStart) * 10) / 10 : null;")
        except JavascriptException:
            timing = None
        try:
            for entry in d.get_log("browser"):
                message = entry.get("message", "")
                if "Content Security Policy" in message or "Refused to" in message:
                    self.fail(f"{label}: the console reports a CSP refusal: {message[:300]}")
        except WebDriverException:
            pass
        Portal.pages.append((name, d.current_url.replace(self.base, ""), timing, violations))
        return name

    def check_headers(self, url, expect_status):
        """The security headers of the page, fetched again with this profile's cookies."""
        r = self.http().get(url, allow_redirects=False, timeout=30)
        if expect_status is not None and r.status_code != expect_status:
            self.fail(f"GET {url}: HTTP {r.status_code}, expected {expect_status}")
        h = r.headers
        csp = h.get("Content-Security-Policy", "")
        problems = []
        directives = {p.strip().split(" ")[0]: p.strip() for p in csp.split(";") if p.strip()}
        script = directives.get("script-src", directives.get("default-src", ""))
        if "'self'" not in script or "'unsafe-inline'" in script or "'unsafe-eval'" in script:
            problems.append(f"script-src is {script!r}")
        style = directives.get("style-src", directives.get("default-src", ""))
        if "'unsafe-inline'" in style:
            problems.append(f"style-src allows inline: {style!r}")
        if directives.get("frame-ancestors") != "frame-ancestors 'none'":
            problems.append(f"frame-ancestors is {directives.get('frame-ancestors')!r}")
        if h.get("X-Frame-Options", "").upper() != "DENY":
            problems.append(f"X-Frame-Options {h.get('X-Frame-Options')!r}")
        if "no-store" not in h.get("Cache-Control", ""):
            problems.append(f"Cache-Control {h.get('Cache-Control')!r}")
        if h.get("Referrer-Policy", "").lower() != "no-referrer":
            problems.append(f"Referrer-Policy {h.get('Referrer-Policy')!r}")
        if problems:
            self.fail(f"GET {url} ({r.status_code}): headers: " + "; ".join(problems))

    def accessibility(self, label):
        from axe_selenium_python import Axe
        axe = Axe(self.driver)
        try:
            axe.inject()
            # The axe-core that axe-selenium-python bundles (3.1.1) predates two autofill tokens of the HTML
            # standard: one-time-code (the TOTP field) and autocomplete="username" on an e-mail input; they are
            # told to axe through its own check options, as Tests/system/oauth/browser/browser_login.py does.
            # Its autocomplete-appropriate check also refuses the state terms "off" and "on" on every input type
            # but text (its type table has no entry for them), while the HTML standard allows them on any input:
            # they are added to that table for the input types the Portal uses. Nothing else is relaxed.
            self.driver.execute_script(
                "var any = ['text', 'search', 'email', 'password', 'number', 'url', 'tel'];"
                "axe.configure({checks: ["
                "{id: 'autocomplete-valid', options: {standaloneTerms: ['one-time-code']}},"
                "{id: 'autocomplete-appropriate', options: {username: ['text', 'search', 'email'], off: any, on: any}}]});")
            results = axe.run()
        except (JavascriptException, WebDriverException) as error:
            self.fail(f"axe-core could not run on {label}: {error.msg}")
            return None
        violations = self.without_known_false_positives(results.get("violations", []), label)
        for v in violations:
            targets = "; ".join(" ".join(n.get("target", [])) + " " + n.get("html", "")[:160] for n in v.get("nodes", [])[:4])
            log(f"  axe {label}: {v.get('impact')} {v['id']} ({v.get('help')}): {targets}")
        serious = [v for v in violations if v.get("impact") in ("serious", "critical")]
        if serious:
            self.fail(f"axe-core: {len(serious)} serious or critical violations on {label}: "
                      + ", ".join(v["id"] for v in serious))
        return len(violations)

    def without_known_false_positives(self, violations, label):
        """The axe-core that axe-selenium-python bundles (3.1.1) reports `dlitem` for <dt>/<dd> grouped in a
        <div> inside a <dl>, which the HTML standard allows (axe-core 3.2 follows it). Those nodes, and only
        those, are dropped (each is checked in the page); every other node of the rule stays."""
        kept = []
        for v in violations:
            if v.get("id") == "dlitem":
                nodes = []
                for node in v.get("nodes", []):
                    selector = " ".join(node.get("target", []))
                    grouped = self.driver.execute_script(
                        "var e = document.querySelector(arguments[0]); var p = e && e.parentElement;"
                        "return !!(e && /^(DT|DD)$/.test(e.tagName) && p && p.tagName === 'DIV' && p.parentElement"
                        " && p.parentElement.tagName === 'DL');", selector)
                    if not grouped:
                        nodes.append(node)
                if len(nodes) < len(v.get("nodes", [])):
                    log(f"  axe {label}: dlitem on {len(v['nodes']) - len(nodes)} <dt>/<dd> in a <div> group of a <dl> "
                        "(valid HTML; a false positive of axe-core 3.1.1) not counted")
                if not nodes:
                    continue
                v = dict(v, nodes=nodes)
            kept.append(v)
        return kept

    def once_cookie_note(self):
        """What the browser holds of the hand-over cookie (why a value shown once may be missing)."""
        held = [c for c in self.driver.get_cookies() if c["name"].endswith("cosync-portal-once")]
        if not held:
            return " (the browser holds no cosync-portal-once cookie)"
        return f" (the browser still holds {held[0]['name']} of {len(held[0]['value'])} characters)"

    # -- elements --
    def el(self, selector, what=None, timeout=10):
        by = By.ID if re.fullmatch(r"[A-Za-z][\w-]*", selector) else By.CSS_SELECTOR
        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(lambda d: d.find_element(by, selector))
        except TimeoutException:
            raise CheckFailed(f"no element {selector!r} ({what or 'contract'}) on {self.driver.current_url} "
                              f"(h1: {self.h1()!r})") from None

    def has(self, selector):
        by = By.ID if re.fullmatch(r"[A-Za-z][\w-]*", selector) else By.CSS_SELECTOR
        return bool(self.driver.find_elements(by, selector))

    def h1(self):
        found = self.driver.find_elements(By.TAG_NAME, "h1")
        return found[0].text.strip() if found else ""

    def text(self, selector):
        element = self.el(selector)
        value = element.get_attribute("value") if element.tag_name in ("input", "textarea") else None
        return (value or element.text or element.get_attribute("textContent") or "").strip()

    def fill(self, selector, value):
        element = self.el(selector)
        if element.tag_name == "select":
            Select(element).select_by_value(value)
        else:
            element.clear()
            element.send_keys(value)

    def submit(self, button, label, reloads=False):
        """Clicks a submit button (id or element) and waits for the next page (`reloads`: see `settle`)."""
        element = self.el(button) if isinstance(button, str) else button
        old = self.driver.find_element(By.TAG_NAME, "html")
        element.click()
        try:
            WebDriverWait(self.driver, 30, poll_frequency=0.1).until(lambda d: _stale(old))
        except TimeoutException:
            raise CheckFailed(f"{label}: submitting did not load a new page") from None
        return self.settle(label, reloads=reloads)

    def path(self):
        return urllib.parse.urlsplit(self.driver.current_url).path

    def http(self):
        """A requests session with this profile's cookies (the Portal's session cookie among them)."""
        s = requests.Session()
        for c in self.driver.get_cookies():
            s.cookies.set(c["name"], c["value"])
        s.headers["Origin"] = self.base
        return s

    def page_csrf(self):
        found = self.driver.find_elements(By.CSS_SELECTOR, "input[name=csrf]")
        return found[0].get_attribute("value") if found else None

    # -- account steps --
    def accept_invite(self, link, email, password):
        self.email, self.password = email, password
        self.get(link, "invite")
        self.fill("password", password)
        self.fill("password-confirm", password)
        self.submit("invite-submit", "enrol")
        key = self.el("totp-key", "the TOTP key on the enrolment page", 15).text.strip()
        if not key:
            key = self.driver.find_element(By.ID, "totp-key").get_attribute("textContent").strip()
        if len(re.sub(r"[^A-Za-z2-7]", "", key)) < 16:
            raise CheckFailed(f"#totp-key shows {key!r}, not a base32 key")
        if not self.driver.find_elements(By.CSS_SELECTOR, "svg"):
            self.fail("the enrolment page has no QR code (SVG)")
        self.auth = Authenticator(key)
        self.fill("code", self.auth.code())
        self.submit("enrol-submit", "after-enrolment")
        self.expect_signed_in("after enrolment")
        self.check_cookie()

    def expect_signed_in(self, when):
        if not self.has("sign-out"):
            raise CheckFailed(f"not signed in {when}: no sign-out form (h1 {self.h1()!r}, {self.path()})")

    def check_cookie(self):
        cookies = {c["name"]: c for c in self.driver.get_cookies()}
        c = cookies.get("cosync-portal")
        if c is None:
            self.fail(f"no cookie cosync-portal (http loopback public URL); cookies: {sorted(cookies)}")
            return
        if not c.get("httpOnly") or c.get("sameSite") != "Strict" or c.get("path") != "/":
            self.fail(f"cookie cosync-portal: httpOnly {c.get('httpOnly')}, sameSite {c.get('sameSite')}, path {c.get('path')}")

    def sign_out(self):
        form = self.el("sign-out")
        button = form.find_elements(By.CSS_SELECTOR, "button, input[type=submit]")
        if not button:
            raise CheckFailed("the sign-out form has no button")
        self.submit(button[0], "signed-out")
        if self.has("sign-out"):
            self.fail("still signed in after signing out")
        r = self.http().get(self.base + "/portal", allow_redirects=False, timeout=30)
        if r.status_code not in (302, 303, 307) or "/portal/sign-in" not in r.headers.get("Location", ""):
            self.fail(f"GET /portal after signing out: HTTP {r.status_code} Location {r.headers.get('Location')!r} "
                      "(expected a redirect to /portal/sign-in)")

    def sign_in(self):
        self.get("/portal/sign-in", "sign-in")
        self.fill("email", self.email)
        self.fill("password", self.password)
        self.submit("sign-in-submit", "sign-in-code")
        self.fill("code", self.auth.code())
        self.submit("code-submit", "after-sign-in")
        self.expect_signed_in("after password + TOTP")

    # -- passkeys (Chromium's virtual authenticator, through the WebDriver WebAuthn extension) --
    def add_virtual_authenticator(self):
        """A platform authenticator in this profile: CTAP2, resident keys, user verification that always
        succeeds (a passkey on this device). It signs with a counter that goes up by one per use."""
        self.driver.add_virtual_authenticator(VirtualAuthenticatorOptions(
            protocol="ctap2", transport="internal", has_resident_key=True, has_user_verification=True,
            is_user_consenting=True, is_user_verified=True))

    def passkey_click(self, button, label):
        """Clicks a passkey button (portal.js runs the ceremony, then loads the page the server names) and
        waits for the next page; a refusal the script shows in the status line fails at once."""
        element = self.el(button, "the passkey button (portal.js shows it when WebAuthn is there)")
        WebDriverWait(self.driver, 10, poll_frequency=0.1).until(lambda d: element.is_displayed())
        old = self.driver.find_element(By.TAG_NAME, "html")
        element.click()

        def done(d):
            if _stale(old):
                return True
            try:
                shown = [e.text for e in d.find_elements(By.CSS_SELECTOR, "[role=alert]") if e.is_displayed() and e.text.strip()]
            except WebDriverException:
                # The page changed between finding the status line and reading it (seen in CI): look again.
                return _stale(old)
            if shown:
                raise CheckFailed(f"{label}: the passkey ceremony was refused: {shown[0]!r}")
            return False
        try:
            WebDriverWait(self.driver, 30, poll_frequency=0.1).until(done)
        except TimeoutException:
            raise CheckFailed(f"{label}: the passkey button did not lead to a new page") from None
        return self.settle(label)

    def passkeys_held(self):
        return self.driver.get_credentials()

    def add_passkey(self, name):
        """On /portal/account: adds a passkey of this profile's virtual authenticator; it is then listed."""
        self.get("/portal/account", "account")
        if not self.has("passkeys"):
            self.fail("the account page has no #passkeys list")
        self.fill("passkey-name", name)
        self.passkey_click("passkey-add", "account-passkey-added")
        if self.path() != "/portal/account":
            raise CheckFailed(f"adding a passkey ended on {self.path()}, not /portal/account")
        listed = [e.text.strip() for e in self.driver.find_elements(By.CSS_SELECTOR, "#passkeys .passkey-name")]
        if name not in listed:
            self.fail(f"#passkeys lists {listed}, not the new passkey {name!r}")
        if len(self.passkeys_held()) != 1:
            self.fail(f"the virtual authenticator holds {len(self.passkeys_held())} credentials (one resident key expected)")

    def sign_in_with_passkey(self):
        """The sign-in page's passkey button, no e-mail typed (a discoverable credential)."""
        self.get("/portal/sign-in", "sign-in")
        before = [c.sign_count for c in self.passkeys_held()]
        self.passkey_click("passkey-sign-in", "after-passkey-sign-in")
        self.expect_signed_in("after the passkey sign-in")
        self.check_cookie()
        after = [c.sign_count for c in self.passkeys_held()]
        if sum(after) <= sum(before):
            self.fail(f"the virtual authenticator's passkey was not used (sign counts {before} → {after})")

    @classmethod
    def signed_in(cls, who, args, world):
        """A new browser signed in as one of world["accounts"] ("operator", "developer": the walk app's
        editor): for the walk_*.py modules. The caller quits it and removes it from world["browsers"]."""
        browser = cls(who, args)
        world["browsers"].append(browser)
        browser.email, browser.password, browser.auth = world["accounts"][who]
        browser.sign_in()
        return browser

    def reauth_here(self):
        """On /portal/reauth: password + a code; answers the page it lands on."""
        self.fill("password", self.password)
        self.fill("code", self.auth.code())
        return self.submit("reauth-submit", "after-reauth")

    def apps_listed(self):
        return [a.text.strip() for a in self.driver.find_elements(By.CSS_SELECTOR, "#apps a.app-link")]

    def open_app(self, name):
        for a in self.driver.find_elements(By.CSS_SELECTOR, "#apps a.app-link"):
            if a.text.strip() == name:
                return self.submit(a, "overview")
        raise CheckFailed(f"no a.app-link {name!r} in #apps (shown: {self.apps_listed()})")

    def create_app(self, name, product="cosyncAuth"):
        self.get("/portal", "apps")
        self.submit(self.el("new-app"), "new-app")
        self.fill("name", name)
        self.fill("product", product)
        self.submit("create-app-submit", "keys-new-token")
        app_id = self.text("app-id")
        if not app_id:
            raise CheckFailed(f"the keys page after creating {name!r} shows no #app-id")
        token = self.text("app-token") if self.has("app-token") else ""
        if not token:
            self.fail(f"the keys page after creating {name!r} does not show the new app token in #app-token"
                      + self.once_cookie_note())
            token = admin_rotate(self.args, app_id)
        return app_id, token

    def invite(self, app_id, email, role):
        self.get(f"/portal/apps/{app_id}/members", f"members-invite-{role}")
        self.fill("invite-email", email)
        self.fill("invite-role", role)
        self.submit("invite-submit", f"members-invited-{role}")
        link = self.text("invite-link")
        found = re.search(r"(https?://[^\s\"'<>]+)?(/portal/invite/[A-Za-z0-9._~%-]+)", link)
        if not found:
            raise CheckFailed(f"#invite-link shows {link!r}, no /portal/invite/<code> link")
        return self.base + found.group(2)


def admin_rotate(args, app_id):
    """A WORKAROUND so that the walk can go on when a page did not show an app token: a token from the admin API
    (operator token). Only reached after a failure has been recorded."""
    log(f"  (workaround: the app token of {app_id} is taken from the admin API so the walk can go on)")
    r = requests.post(f"{args.base}/admin/v1/apps/{app_id}/app-token/rotate", json={"gracePeriodSeconds": 0},
                      headers={"Authorization": f"Bearer {args.operator_token}"}, timeout=30)
    if r.status_code not in (200, 201):
        raise CheckFailed(f"admin app-token/rotate of {app_id}: HTTP {r.status_code} {r.text[:200]}")
    return r.json()["appToken"]


def page_form_fields(portal, choose):
    """The named fields (with their values) of the first POST form of the current page that `choose` picks."""
    for form in forms_of(portal.driver.page_source):
        if form["method"] == "post" and choose(form):
            return dict(form["fields"])
    raise CheckFailed(f"no such form on {portal.driver.current_url}")


def page_message(page_html):
    """The <h1> and the first paragraph of <main> of a page (what a refusal says)."""
    h1 = re.search(r"<h1[^>]*>(.*?)</h1>", page_html, re.S)
    main = re.search(r"<main[^>]*>.*?<p[^>]*>(.*?)</p>", page_html, re.S)
    strip = lambda m: re.sub(r"<[^>]+>", "", m.group(1)).strip() if m else ""
    return f"{strip(h1)}: {strip(main)}"


def _stale(element):
    try:
        element.is_enabled()
        return False
    except WebDriverException:
        return True


def wait_for(condition, what, timeout=10):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ok, last = condition()
        if ok:
            return last
        time.sleep(0.2)
    raise CheckFailed(f"{what} (last: {str(last)[:300]})")


# --- the walk ---------------------------------------------------------------------------------------------

def walk(args, world):
    end_user = EndUser(args.base)
    suffix = os.urandom(3).hex()

    # 1. The operator.
    op = Portal("operator", args)
    world["browsers"].append(op)
    op.accept_invite(args.operator_invite, args.operator_email, PASSWORD_LENGTH_OK + "op")
    op.sign_out()
    op.sign_in()
    if op.path().rstrip("/") != "/portal":
        op.get("/portal", "apps")
    if not op.has("new-app"):
        op.fail("the operator's apps list has no #new-app link")
    walk_name, other_name, fuzz_name = f"Walk app {suffix}", f"Other app {suffix}", f"Fuzz app {suffix}"
    app_id, token1 = op.create_app(walk_name)
    log(f"walk app {app_id} created; its token shown once")
    op.get(f"/portal/apps/{app_id}/keys", "keys-again")
    if token1 in op.driver.page_source:
        op.fail("the keys page shows the app token again on a later visit (it is shown once)")
    other_id, _ = op.create_app(other_name)
    fuzz_id, _ = op.create_app(fuzz_name)
    world.update(app_id=app_id, other_id=other_id, fuzz_id=fuzz_id, walk_name=walk_name)
    op.get("/portal", "apps-three")
    listed = op.apps_listed()
    for name in (walk_name, other_name, fuzz_name):
        if name not in listed:
            op.fail(f"the operator's apps list does not show {name!r} (shows {listed})")
    op.fill("q", other_name)
    op.el("q").send_keys(Keys.ENTER)
    WebDriverWait(op.driver, 15).until(lambda d: "q=" in d.current_url)
    op.settle("apps-search")
    if op.apps_listed() != [other_name]:
        op.fail(f"searching the apps for {other_name!r} shows {op.apps_listed()}")

    op.get("/portal", "apps")
    op.open_app(walk_name)
    for link in ("nav-settings", "nav-keys", "nav-users", "nav-members"):
        op.el(link, f"the overview's {link} link")
    op.get(f"/portal/apps/{app_id}/settings", "settings")
    op.fill("signupFlow", "none")
    op.submit("settings-submit", "settings-saved")
    wait_for(lambda: (lambda r: (r[0] == 200 and r[1].get("signupFlow") == "none", r))(end_user.get_application(token1)),
             "the operator's signup flow `none` does not show through getApplication")

    # 2. An end user signs up (flow none: signed in at once, a session).
    handle = f"end-user-{suffix}@example.com"
    status, body = end_user.signup(token1, handle, END_USER_PASSWORD)
    if status != 200 or "access-token" not in body:
        raise CheckFailed(f"end-user signup: HTTP {status} {body[:300]}")
    access1 = json.loads(body)["access-token"]
    if end_user.get_user(access1) != 200:
        raise CheckFailed("getUser with the signup's access token is not 200")

    # The keys (owners and operators only): a fresh sign-in first (the page itself), then the rotation without grace.
    op.get(f"/portal/apps/{app_id}/keys", "keys")
    if op.text("app-id") != app_id:
        op.fail(f"#app-id shows {op.text('app-id')!r}, not {app_id}")
    if "BEGIN PUBLIC KEY" not in op.text("raw-public-key") and len(op.text("raw-public-key")) < 100:
        op.fail(f"#raw-public-key shows {op.text('raw-public-key')[:80]!r}")
    world["rotate_action"] = op.el("rotate-token").get_attribute("action") or op.driver.current_url
    op.get(f"/portal/reauth?next={urllib.parse.quote(f'/portal/apps/{app_id}/keys')}", "reauth")
    op.reauth_here()
    if op.path() != f"/portal/apps/{app_id}/keys":
        op.fail(f"the fresh sign-in lands on {op.path()}, not the `next` page /portal/apps/{app_id}/keys")
        op.get(f"/portal/apps/{app_id}/keys", "keys")
    op.fill("graceSeconds", "0")
    op.submit("rotate-token-submit", "keys-rotated")
    if op.path().startswith("/portal/reauth"):
        log("the rotation asked for a fresh sign-in again")
        op.reauth_here()
        op.fill("graceSeconds", "0")
        op.submit("rotate-token-submit", "keys-rotated")
    token2 = op.text("app-token") if op.has("app-token") else ""
    if not token2 or token2 == token1:
        op.fail(f"after the rotation #app-token shows {token2!r}" + op.once_cookie_note())
        token2 = None
    wait_for(lambda: (lambda r: (r[0] != 200, r))(end_user.get_application(token1)),
             "the old app token still answers getApplication 200 after a rotation with no grace")
    if token2 is None:
        token2 = admin_rotate(args, app_id)
    status, _ = end_user.get_application(token2)
    if status != 200:
        op.fail(f"the new app token answers getApplication {status}")
    log("the old app token stopped; the new one works")

    dev_email, viewer_email = f"developer-{suffix}@example.com", f"viewer-{suffix}@example.com"
    dev_link = op.invite(app_id, dev_email, "editor")
    viewer_link = op.invite(app_id, viewer_email, "viewer")
    world["operator_http"] = op.http()
    world["members_action"] = op.el("invite-email").find_element(By.XPATH, "ancestor::form").get_attribute("action")
    world["members_fields"] = page_form_fields(op, lambda form: "invite-email" in form["ids"])
    world["operator_auth"] = op.auth
    world["accounts"] = {"operator": (op.email, op.password, op.auth)}
    op.quit()
    world["browsers"].remove(op)

    # 3. The developer (editor), in a profile of its own.
    dev = Portal("developer", args)
    world["browsers"].append(dev)
    dev.accept_invite(dev_link, dev_email, PASSWORD_LENGTH_OK + "dev")
    world["accounts"]["developer"] = (dev.email, dev.password, dev.auth)
    # It adds a passkey (Chromium's virtual authenticator) on its account page, signs out, and signs in with the
    # passkey alone. Its TOTP stays, so Portal.signed_in("developer") (a new profile, without this
    # authenticator) still signs in with password + TOTP.
    dev.add_virtual_authenticator()
    dev.add_passkey("Walk laptop")
    dev.sign_out()
    dev.sign_in_with_passkey()
    log("the developer signed in with its passkey (virtual authenticator)")
    if dev.path().rstrip("/") != "/portal":
        dev.get("/portal", "apps")
    listed = dev.apps_listed()
    if listed != [walk_name]:
        dev.fail(f"the developer's apps list shows {listed}, expected only {walk_name!r}")
    if dev.has("new-app"):
        dev.fail("a developer's apps list offers #new-app (operator only)")
    dev.open_app(walk_name)
    dev.submit(dev.el("nav-settings"), "settings")
    dev.fill("metadataFields", json.dumps(METADATA_REFUSED))
    dev.submit("settings-submit", "settings-refused")
    error = dev.text("form-error") if dev.has("form-error") else ""
    if not error:
        dev.fail("a metadata field on the registered claim `sub` shows no #form-error")
    else:
        log(f"settings refused as the API refuses: {error!r}")
    _, app_now = end_user.get_application(token2)
    if not isinstance(app_now, dict) or app_now.get("metaData"):
        dev.fail(f"a refused metadata field was saved: {app_now.get('metaData')}")
    dev.get(f"/portal/apps/{app_id}/settings", "settings")
    dev.fill("signupFlow", "code")
    dev.fill("metadataFields", json.dumps(METADATA_OK))
    dev.submit("settings-submit", "settings-saved")
    if dev.has("form-error") and dev.text("form-error"):
        dev.fail(f"saving valid settings shows #form-error {dev.text('form-error')!r}")

    def settings_saved():
        status, app = end_user.get_application(token2)
        if status != 200 or not isinstance(app, dict):
            return False, (status, app)
        fields = [(f.get("path"), f.get("fieldName")) for f in app.get("metaData", [])]
        return app.get("signupFlow") == "code" and ("user.company", "company") in fields, app
    wait_for(settings_saved, "signupFlow `code` and the metadata field do not show through getApplication")
    status, body = end_user.signup(token2, f"second-{suffix}@example.com", END_USER_PASSWORD)
    if status != 200 or body.strip() != "true":
        dev.fail(f"a signup under the code flow answers HTTP {status} {body[:200]!r} (expected `true`, a code e-mailed)")

    # The keys: an editor sees the app id and the public key but may not rotate the token (owners only).
    dev.get(f"/portal/apps/{app_id}/keys", "keys")
    if dev.text("app-id") != app_id:
        dev.fail(f"#app-id shows {dev.text('app-id')!r}, not {app_id}")
    if "BEGIN PUBLIC KEY" not in dev.text("raw-public-key") and len(dev.text("raw-public-key")) < 100:
        dev.fail(f"#raw-public-key shows {dev.text('raw-public-key')[:80]!r}")
    if dev.has("rotate-token") or dev.has("rotate-token-submit"):
        dev.fail("an editor's keys page offers the rotate form (owner/operator only)")
    csrf = dev.page_csrf()
    r = dev.http().post(world["rotate_action"], data={"csrf": csrf or "", "graceSeconds": "0"}, allow_redirects=False, timeout=30)
    if r.status_code != 403:
        dev.fail(f"an editor's POST rotate-token (with another form's csrf): HTTP {r.status_code}, expected 403")
    if end_user.get_application(token2)[0] != 200:
        dev.fail("an editor's refused rotation changed the app token")

    # The end user logs in again (a second session); the developer revokes one of the two.
    access2 = end_user.login(token2, handle, END_USER_PASSWORD)
    dev.get(f"/portal/apps/{app_id}", "overview")
    dev.submit(dev.el("nav-users"), "users")
    dev.fill("q", handle)
    dev.el("q").send_keys(Keys.ENTER)
    WebDriverWait(dev.driver, 15).until(lambda d: "q=" in d.current_url)
    dev.settle("users-search")
    links = [a for a in dev.driver.find_elements(By.CSS_SELECTOR, "#users a.user-link") if a.text.strip() == handle]
    if len(links) != 1:
        raise CheckFailed(f"searching the users for {handle} shows links "
                          f"{[a.text for a in dev.driver.find_elements(By.CSS_SELECTOR, '#users a.user-link')]}")
    dev.submit(links[0], "user")
    world["user_path"] = dev.path()
    forms = dev.driver.find_elements(By.CSS_SELECTOR, "#sessions form.revoke-session")
    if len(forms) != 2:
        raise CheckFailed(f"the user page shows {len(forms)} form.revoke-session in #sessions (2 sessions expected)")
    button = forms[0].find_element(By.CSS_SELECTOR, "button, input[type=submit]")
    label = (button.text or button.get_attribute("value") or "").strip()
    if label != "Revoke":
        dev.fail(f"the revoke button says {label!r}, not 'Revoke'")
    dev.submit(button, "user-session-revoked")
    if not dev.path().startswith(world["user_path"]):
        dev.get(world["user_path"], "user")
    remaining = len(dev.driver.find_elements(By.CSS_SELECTOR, "#sessions form.revoke-session"))
    if remaining != 1:
        dev.fail(f"after revoking one of 2 sessions the user page shows {remaining}")
    else:
        # The live session's revoke form: the viewer forges a POST to it below.
        world["revoke_action"] = dev.el("#sessions form.revoke-session").get_attribute("action")
        world["revoke_fields"] = page_form_fields(dev, lambda form: "revoke-session" in form["class"].split())
    answers = wait_for(lambda: (lambda a: (sorted(a) == [200, 405], a))([end_user.get_user(access1), end_user.get_user(access2)]),
                       "after revoking one session, getUser does not answer 405 for one token and 200 for the other")
    world["live_access"] = access1 if answers[0] == 200 else access2
    log(f"one session revoked: getUser answers {answers}")
    world["token2"] = token2

    # The members page is the owner's: an editor may see the list but gets no invite form.
    r = dev.http().get(f"{args.base}/portal/apps/{app_id}/members", allow_redirects=False, timeout=30)
    if r.status_code == 200 and "invite-email" in r.text:
        dev.fail("an editor's members page offers the invite form (owner/operator only)")
    if r.status_code >= 500:
        dev.fail(f"an editor's members page: HTTP {r.status_code}")

    # 4. Refusals.
    http = dev.http()
    csrf = dev.page_csrf()
    settings_url = f"{args.base}/portal/apps/{app_id}/settings"
    for what, data in (("no csrf", {"signupFlow": "none", "metadataFields": "[]"}),
                       ("a wrong csrf", {"csrf": "x" + (csrf or "")[1:], "signupFlow": "none", "metadataFields": "[]"}),
                       ("an empty csrf", {"csrf": "", "signupFlow": "none", "metadataFields": "[]"})):
        r = http.post(settings_url, data=data, allow_redirects=False, timeout=30)
        if r.status_code != 403:
            dev.fail(f"POST settings with {what}: HTTP {r.status_code}, expected 403")
    r = http.post(world["rotate_action"], data={"graceSeconds": "0"}, allow_redirects=False, timeout=30)
    if r.status_code != 403:
        dev.fail(f"POST rotate-token with no csrf: HTTP {r.status_code}, expected 403")
    # Before sign-in too: the sign-in form without its csrf (a browser with the browser-key cookie, and without).
    anonymous = requests.Session()
    anonymous.get(f"{args.base}/portal/sign-in", timeout=30)
    for who, session in (("with the browser key", anonymous), ("without cookies", requests.Session())):
        r = session.post(f"{args.base}/portal/sign-in", data={"email": dev_email, "password": dev.password},
                         allow_redirects=False, timeout=30)
        if r.status_code != 403 or "code-submit" in r.text:
            dev.fail(f"POST /portal/sign-in with no csrf ({who}): HTTP {r.status_code}, expected 403")
    status, app_now = end_user.get_application(token2)
    if status != 200 or not isinstance(app_now, dict) or app_now.get("signupFlow") != "code":
        dev.fail(f"CSRF-less POSTs changed the app: getApplication {status} {str(app_now)[:200]}")
    for path in (f"/portal/apps/{other_id}", f"/portal/apps/{other_id}/settings", f"/portal/apps/{other_id}/keys",
                 f"/portal/apps/{other_id}/users", f"/portal/apps/{other_id}/members", "/portal/apps/no-such-app-0000"):
        r = http.get(args.base + path, allow_redirects=False, timeout=30)
        if r.status_code != 404:
            dev.fail(f"GET {path} (no role on it): HTTP {r.status_code}, expected 404")
        if other_name in r.text:
            dev.fail(f"GET {path} (no role on it) shows the app's name")
    r = http.post(f"{args.base}/portal/apps/{other_id}/settings", data={"csrf": csrf, "signupFlow": "none"},
                  allow_redirects=False, timeout=30)
    if r.status_code not in (403, 404) or other_name in r.text:
        dev.fail(f"POST /portal/apps/<other>/settings with another form's csrf: HTTP {r.status_code}, expected 403 or 404 "
                 "(and not the app's name)")
    dev.get(f"/portal/apps/{other_id}", "not-found", expect_status=404)
    dev.quit()
    world["browsers"].remove(dev)

    # The viewer: no change controls on any page, and forged POSTs answer 403.
    viewer = Portal("viewer", args)
    world["browsers"].append(viewer)
    viewer.accept_invite(viewer_link, viewer_email, PASSWORD_LENGTH_OK + "view")
    for path, label in ((f"/portal/apps/{app_id}", "overview"), (f"/portal/apps/{app_id}/settings", "settings"),
                        (f"/portal/apps/{app_id}/keys", "keys"), (f"/portal/apps/{app_id}/users?q={urllib.parse.quote(handle)}", "users"),
                        (world["user_path"], "user"), (f"/portal/apps/{app_id}/members", "members")):
        viewer.driver.get(args.base + path)
        viewer.settle(label)
        shown = [c for c in CHANGE_CONTROLS if viewer.has(c)]
        posts = [f for f in viewer.driver.find_elements(By.CSS_SELECTOR, "form")
                 if (f.get_attribute("method") or "get").lower() == "post" and f.get_attribute("id") != "sign-out"]
        if shown or posts:
            viewer.fail(f"the viewer's {label} page offers change controls: {shown} "
                        f"{[f.get_attribute('action') for f in posts]}")
    viewer.driver.get(f"{args.base}/portal/apps/{app_id}")
    csrf = viewer.page_csrf()
    if not csrf:
        viewer.fail("the viewer's overview page has no csrf (the sign-out form's) to forge with")
    http = viewer.http()
    forged = [(settings_url, {"csrf": csrf, "signupFlow": "none", "metadataFields": "[]"}),
              (world["rotate_action"], {"csrf": csrf, "graceSeconds": "0"}),
              (world.get("revoke_action"), dict(world.get("revoke_fields", {}), csrf=csrf)),
              (world["members_action"], dict(world["members_fields"], csrf=csrf))]
    for name in world["members_fields"]:
        if "email" in name.lower():
            forged[-1][1][name] = f"forged-{suffix}@example.com"
        elif "role" in name.lower():
            forged[-1][1][name] = "owner"
    for url, data in forged:
        if not url:
            continue
        r = http.post(url, data=data, allow_redirects=False, timeout=30)
        if r.status_code != 403:
            viewer.fail(f"the viewer's forged POST {url.replace(args.base, '')}: HTTP {r.status_code}, expected 403")
        else:
            log(f"the viewer's forged POST {url.replace(args.base, '')}: 403 ({page_message(r.text)!r})")
    status, app_now = end_user.get_application(token2)
    if status != 200 or not isinstance(app_now, dict) or app_now.get("signupFlow") != "code":
        viewer.fail(f"a viewer's forged POST changed the app: getApplication {status} {str(app_now)[:200]}")
    if end_user.get_user(world["live_access"]) != 200:
        viewer.fail("a viewer's forged POST revoked the user's remaining session")
    world["viewer_http"] = viewer.http()
    # Both accepted: the operator's members page lists them with their roles.
    r = world["operator_http"].get(f"{args.base}/portal/apps/{app_id}/members", timeout=30)
    listed = re.search(r'<ul id="members".*?</ul>', r.text, re.S)
    for email, role in ((dev_email, "editor"), (viewer_email, "viewer")):
        if r.status_code != 200 or not listed or email not in listed.group(0):
            viewer.fail(f"the operator's members page (HTTP {r.status_code}) does not list {email} ({role}) in #members")
    viewer.quit()
    world["browsers"].remove(viewer)


# --- the fuzz ---------------------------------------------------------------------------------------------

class Raw(str):
    """A value sent as it is (already percent-encoded, possibly invalid)."""


HOSTILE = [
    "", " ", "\t", "\r\n", "\x00", "a\x00b", "\x07\x1b[31m", "\x7f", "\u0085", "\u2028", "\u202e\u0645", "\ufeff",
    "\ud800", "\udfff", "\U0001F600" * 64, "é" * 5000, "a" * 257, "a" * 10_000, "a" * 200_000,
    "-1", "0", "1", "-0", "2147483648", "-2147483649", "9223372036854775807", "9223372036854775808",
    "-9223372036854775809", "1e309", "-1e309", "NaN", "Infinity", "0x1F", "1.5", "1,5", "٣", "１２", "99999999999999999999999",
    "true", "false", "null", "[]", "{}", "[null]", '{"a":1}', "[1,2,3]", '"string"', "[" * 5000 + "]" * 5000,
    '[{"path":1,"fieldName":2}]', '[{"path":"a","fieldName":"b","required":"yes"}]', '[{"path":"","fieldName":""}]',
    '[{"path":"a..b","fieldName":"x"}]', '[{"path":"a","fieldName":"x","unknown":true}]', '[' + '{"path":"p","fieldName":"f"},' * 2000 + '{}]',
    "<script>alert(1)</script>", "\"><img src=x onerror=alert(1)>", "{{name}}", "{{{csrf}}}", "%s%s%n", "../../etc/passwd",
    "' OR 1=1 --", "\\", "/", "?", "#", "&", "=", "+", "@", "a@b", "@example.com", "a@b@c", "a b@c.de", "x" * 300 + "@example.com",
    "ü@müller.de", "owner", "OWNER", "operator", "editor ", "viewer\x00", "code", "link", "none", "CODE", "appKey", "cosyncAuth",
    "javascript:alert(1)", "https://evil.example/", "//evil.example", "\u0000\u0001\u0002",
    Raw("%FF"), Raw("%ED%A0%80"), Raw("%C0%AF"), Raw("%"), Raw("%zz"), Raw("a%00b"), Raw("%F0%9F%98"), Raw("%E2%80%AE"),
]


def random_value(rng):
    kind = rng.random()
    if kind < 0.5:
        return rng.choice(HOSTILE)
    if kind < 0.7:
        return "".join(chr(rng.choice([rng.randint(0, 0x1f), rng.randint(0x20, 0x7e), rng.randint(0x80, 0x2fff),
                                        rng.randint(0xe000, 0xfffd), rng.randint(0x10000, 0x10ffff)]))
                       for _ in range(rng.choice([1, 2, 8, 64, 1000])))
    if kind < 0.85:
        return str(rng.choice([-1, 1, 10, 1000]) * rng.randint(0, 2**rng.choice([8, 31, 63, 80])))
    return json.dumps(rng.choice([[], {}, [1], {"a": [None]}, [{"path": "x" * rng.randint(0, 300), "fieldName": rng.random()}],
                                  rng.random(), True, None]))


def encode(pairs):
    out = []
    for name, value in pairs:
        v = value if isinstance(value, Raw) else urllib.parse.quote_plus(str(value).encode("utf-8", "surrogatepass"))
        out.append(urllib.parse.quote_plus(name) + "=" + v)
    return "&".join(out)


class Fuzz:
    def __init__(self, args, seed):
        self.args = args
        self.rng = random.Random(seed)
        self.failures = []
        self.summary = []

    def find_form(self, http, page_url, choose, fetch=None):
        r = fetch() if fetch else http.get(page_url, allow_redirects=False, timeout=30)
        if r.status_code != 200:
            return None, r.status_code
        for form in forms_of(r.text):
            if form["method"] == "post" and choose(form):
                return form, 200
        return None, 200

    def run(self, label, http, page_url, choose, cases, only=None, baseline=True, hostile_csrf=False, fetch=None):
        """POSTs `cases` hostile variants of the form `choose` picks on `page_url`; every answer must be < 500."""
        form, status = self.find_form(http, page_url, choose, fetch)
        if form is None:
            self.failures.append(f"fuzz {label}: no such form on {page_url} (HTTP {status})")
            return
        action = urllib.parse.urljoin(page_url, form["action"] or page_url)
        fields = [(n, v) for n, v in form["fields"]]
        names = [n for n, _ in fields if n != "csrf"] if only is None else only
        statuses = {}
        started = time.monotonic()

        def fresh_csrf():
            found, _ = self.find_form(http, page_url, choose, fetch)
            return dict(found["fields"]).get("csrf") if found else None

        csrf = dict(fields).get("csrf")
        for i in range(cases):
            headers = {"Content-Type": "application/x-www-form-urlencoded"}
            pairs = [(n, v) for n, v in fields]
            touched = "baseline"
            if i > 0 or not baseline:
                mode = self.rng.random()
                target = self.rng.choice(names) if names else "csrf"
                if mode < 0.55:
                    pairs = [(n, random_value(self.rng) if n == target else v) for n, v in pairs]
                    touched = target
                elif mode < 0.65 and only is None:
                    pairs = [(n, random_value(self.rng) if n != "csrf" else v) for n, v in pairs]
                    touched = "all fields"
                elif mode < 0.72:
                    pairs = [(n, v) for n, v in pairs if n != target]
                    touched = f"{target} missing"
                elif mode < 0.79:
                    pairs = pairs + [(target, random_value(self.rng)), (target, random_value(self.rng))]
                    touched = f"{target} repeated"
                elif mode < 0.84:
                    pairs = pairs + [(f"extra{k}", random_value(self.rng)) for k in range(self.rng.choice([1, 50, 500]))]
                    touched = "extra fields"
                elif mode < 0.88:
                    pairs = [(n, random_value(self.rng)) if n == "csrf" else (n, v) for n, v in pairs]
                    touched = "csrf"
                elif mode < 0.93:
                    headers["Content-Type"] = self.rng.choice(["application/json", "text/plain", "multipart/form-data",
                                                               "multipart/form-data; boundary=x", "application/x-www-form-urlencoded; charset=latin1", ""])
                    touched = f"content type {headers['Content-Type']!r}"
                elif mode < 0.96:
                    pairs = [(n, "x" * 2_000_000 if n == target else v) for n, v in pairs]
                    touched = f"{target} 2 MB"
                else:
                    pairs = [(f"{target}[]", random_value(self.rng)), (f"{target}[0][a]", "1")] + pairs
                    touched = f"{target}[] brackets"
            if hostile_csrf:
                pairs = [(n, random_value(self.rng) if n == "csrf" else v) for n, v in pairs]
                touched = "csrf"
            body = encode(pairs) if not headers["Content-Type"].startswith("application/json") else json.dumps(dict(
                (n, v) for n, v in pairs if not isinstance(v, Raw)), ensure_ascii=False).encode("utf-8", "surrogatepass")
            if not headers["Content-Type"]:
                del headers["Content-Type"]
            for attempt in (0, 1):
                try:
                    r = http.post(action, data=body, headers=headers, allow_redirects=False, timeout=60)
                    code = r.status_code
                except requests.RequestException as error:
                    code, r = f"{type(error).__name__}", None
                # A csrf may be single use: with a fresh one the same case again, once.
                if code == 403 and touched != "csrf" and attempt == 0 and csrf:
                    new = fresh_csrf()
                    if new and new != csrf:
                        csrf = new
                        fields = [(n, new if n == "csrf" else v) for n, v in fields]
                        pairs = [(n, new if n == "csrf" else v) for n, v in pairs]
                        body = encode(pairs) if not headers.get("Content-Type", "").startswith("application/json") else body
                        continue
                break
            statuses[code] = statuses.get(code, 0) + 1
            if touched == "baseline" and code == 403:
                self.failures.append(f"fuzz {label}: the untouched form answers 403 (the fuzz would not reach the page)")
            if not isinstance(code, int) or code >= 500:
                self.failures.append(f"fuzz {label}: case {i} ({touched}): {code} "
                                     f"{(r.text[:200] if r is not None else '')!r}")
        line = (f"fuzz {label}: {cases} POSTs to {action.replace(self.args.base, '')} in {time.monotonic() - started:.1f} s: "
                + ", ".join(f"{k}×{v}" for k, v in sorted(statuses.items(), key=lambda kv: str(kv[0]))))
        self.summary.append(line)
        log(line)

    def run_get(self, label, http, path, params, cases):
        statuses = {}
        for i in range(cases):
            query = encode([(p, random_value(self.rng)) for p in params if self.rng.random() < 0.8])
            try:
                code = http.get(f"{self.args.base}{path}?{query}", allow_redirects=False, timeout=60).status_code
            except requests.RequestException as error:
                code = type(error).__name__
            statuses[code] = statuses.get(code, 0) + 1
            if not isinstance(code, int) or code >= 500:
                self.failures.append(f"fuzz {label}: GET {path}?{query[:200]}: {code}")
        line = f"fuzz {label}: {cases} GETs of {path}: " + ", ".join(f"{k}×{v}" for k, v in sorted(statuses.items(), key=lambda kv: str(kv[0])))
        self.summary.append(line)
        log(line)


def reauth(args, http, auth, password, f):
    """A fresh sign-in through the form (requests), so the fuzz of a destructive form reaches its handler."""
    page = http.get(f"{args.base}/portal/reauth", timeout=30)
    form = next((x for x in forms_of(page.text) if "reauth-submit" in x["ids"]), {"fields": []})
    csrf = dict(form["fields"]).get("csrf")
    r = http.post(f"{args.base}/portal/reauth", data={"csrf": csrf, "password": password, "code": auth.code()},
                  allow_redirects=False, timeout=30)
    if r.status_code not in (200, 302, 303) or "reauth-submit" in r.text:
        f.failures.append(f"fuzz: the operator's fresh sign-in through /portal/reauth answers {r.status_code}")


def fuzz(args, world):
    f = Fuzz(args, args.seed)
    n = args.fuzz_cases
    base = args.base
    op = world["operator_http"]
    app_id, fuzz_id = world["app_id"], world["fuzz_id"]
    by_id = lambda ident: (lambda form: form["id"] == ident or ident in form["ids"])
    f.run_get("apps search", op, "/portal", ["q", "cursor", "limit"], n // 2)
    f.run_get("users search", op, f"/portal/apps/{app_id}/users", ["q", "cursor", "limit"], n // 2)
    f.run("new app", op, f"{base}/portal/apps/new", by_id("create-app-submit"), max(60, n // 3))
    f.run("settings", op, f"{base}/portal/apps/{fuzz_id}/settings", by_id("settings-submit"), n)
    reauth(args, op, world["operator_auth"], world["operator_password"], f)
    f.run("rotate token", op, f"{base}/portal/apps/{fuzz_id}/keys", by_id("rotate-token"), n)
    f.run("members invite", op, f"{base}/portal/apps/{fuzz_id}/members", by_id("invite-email"), n)
    f.run("revoke session", op, base + world["user_path"], lambda form: "revoke-session" in form["class"].split(), n // 2)

    # An invite for the pre-session forms, then those forms with their own cookies.
    r = op.get(f"{base}/portal/apps/{fuzz_id}/members", timeout=30)
    form = next((x for x in forms_of(r.text) if "invite-email" in x["ids"]), {"fields": []})
    data = dict(form["fields"])
    for name in data:
        if "email" in name.lower():
            data[name] = "fuzz-invitee@example.com"
        elif "role" in name.lower():
            data[name] = "viewer"
    invited = op.post(f"{base}/portal/apps/{fuzz_id}/members", data=data, timeout=30)
    link = re.search(r"/portal/invite/[A-Za-z0-9._~%-]+", invited.text)
    if link:
        guest = requests.Session()
        f.run("accept invite", guest, base + link.group(0), by_id("invite-submit"), n)
        r = guest.get(f"{base}/portal/enrol", allow_redirects=False, timeout=30)
        if not (r.status_code == 200 and "enrol-submit" in r.text):
            # No hostile case accepted the invite (as it should be): accept it properly to reach the enrolment form.
            page = guest.get(base + link.group(0), timeout=30)
            form = next((x for x in forms_of(page.text) if "invite-submit" in x["ids"]), {"fields": []})
            data = dict(form["fields"])
            data.update({"password": PASSWORD_LENGTH_OK + "fuzz", "password-confirm": PASSWORD_LENGTH_OK + "fuzz"})
            guest.post(base + link.group(0), data=data, timeout=30)
            r = guest.get(f"{base}/portal/enrol", allow_redirects=False, timeout=30)
        if r.status_code == 200 and "enrol-submit" in r.text:
            f.run("enrol", guest, f"{base}/portal/enrol", by_id("enrol-submit"), n // 2)
        else:
            log(f"fuzz enrol: skipped (no fuzz case accepted the invite; GET /portal/enrol: {r.status_code})")
    else:
        f.failures.append(f"fuzz: inviting fuzz-invitee through the members form showed no invite link (HTTP {invited.status_code})")
    guest = requests.Session()

    def password_step():
        """Step 1 of the sign-in with the operator's password: its answer is the code form (a fresh ticket)."""
        page = guest.get(f"{base}/portal/sign-in", timeout=30)
        form = next((x for x in forms_of(page.text) if "sign-in-submit" in x["ids"]), {"fields": [], "action": ""})
        data = dict(form["fields"])
        data.update(email=args.operator_email, password=world["operator_password"])
        return guest.post(urllib.parse.urljoin(f"{base}/portal/sign-in", form["action"]), data=data, timeout=30)
    step = password_step()
    if "code-submit" in step.text:
        f.run("sign-in code", guest, f"{base}/portal/sign-in/code", by_id("code-submit"), n // 2, fetch=password_step)
    else:
        f.failures.append(f"fuzz: the operator's password did not lead to the code page (HTTP {step.status_code} {step.url})")
    f.run("sign-in", requests.Session(), f"{base}/portal/sign-in", by_id("sign-in-submit"), n // 2)
    f.run("reauth", op, f"{base}/portal/reauth", by_id("reauth-submit"), n // 3)
    f.run("sign-out (hostile csrf)", op, f"{base}/portal", by_id("sign-out"), n // 4, only=["csrf"], baseline=False,
          hostile_csrf=True)
    r = requests.get(f"{base}/healthz", timeout=10)
    if r.status_code != 200:
        f.failures.append(f"after the fuzz /healthz answers {r.status_code}")
    return f


# --- main -------------------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="the server's base URL (its public URL)")
    parser.add_argument("--operator-email", required=True)
    parser.add_argument("--operator-invite", required=True, help="the first operator's invite link")
    parser.add_argument("--operator-token", help="the admin API's token: only for the workaround after a page showed no app token")
    parser.add_argument("--artifacts", required=True, help="where the screenshots and page sources go")
    parser.add_argument("--fuzz-cases", type=int, default=int(os.environ.get("PORTAL_FUZZ_CASES", "300")))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("PORTAL_FUZZ_SEED", "23")))
    parser.add_argument("--no-fuzz", action="store_true")
    args = parser.parse_args()
    args.base = args.base.rstrip("/")
    for old in os.listdir(args.artifacts) if os.path.isdir(args.artifacts) else []:
        if old.endswith((".png", ".html")):
            os.remove(os.path.join(args.artifacts, old))

    world = {"browsers": [], "operator_password": PASSWORD_LENGTH_OK + "op"}
    started = time.monotonic()
    walked = False
    try:
        walk(args, world)
        # Later pages walk in modules of their own (walk_<pages>.py beside this file, each with
        # run(args, world)), in name order, after the main walk: they sign in with world's accounts.
        # They import this file as `walk`: that must be this very module (not a second copy of it), so
        # that what they record in Portal.failures and Portal.pages is reported below.
        sys.modules.setdefault("walk", sys.modules[__name__])
        for module in sorted(n[:-3] for n in os.listdir(os.path.dirname(os.path.abspath(__file__)))
                             if n.startswith("walk_") and n.endswith(".py")):
            log(f"walk: {module}")
            importlib.import_module(module).run(args, world)
        walked = True
    except Exception as error:  # noqa: BLE001 - every stop of the walk is reported with where the browser was
        message = error.msg if isinstance(error, WebDriverException) else str(error)
        if not isinstance(error, (CheckFailed, WebDriverException)):
            message = f"{type(error).__name__}: {message}\n{traceback.format_exc()}"
        where = ""
        for b in world["browsers"]:
            try:
                where = f" (at {b.driver.current_url}, h1 {b.h1()!r})"
                b.driver.save_screenshot(os.path.join(args.artifacts, f"failure-{b.who}.png"))
                with open(os.path.join(args.artifacts, f"failure-{b.who}.html"), "w", encoding="utf-8") as out:
                    out.write(b.driver.page_source)
            except WebDriverException:
                pass
        Portal.failures.append(f"the walk stopped: {message}{where}")
        if os.environ.get("PORTAL_DEBUG"):
            traceback.print_exc()
    finally:
        for b in list(world["browsers"]):
            b.quit()
    log(f"the walk took {time.monotonic() - started:.1f} s")

    fuzz_failures = []
    if walked and not args.no_fuzz:
        started = time.monotonic()
        result = fuzz(args, world)
        fuzz_failures = result.failures
        log(f"the fuzz took {time.monotonic() - started:.1f} s")

    log(f"{len(Portal.pages)} pages (screenshot, path, server ms, axe violations of any impact):")
    for name, path, ms, violations in Portal.pages:
        log(f"  {name:44} {path[:60]:60} {ms if ms is not None else '?':>7} ms  axe {violations}")
    failures = Portal.failures + fuzz_failures[:50]
    if len(fuzz_failures) > 50:
        failures.append(f"... and {len(fuzz_failures) - 50} more fuzz failures")
    if failures:
        for failure in failures:
            print(f"FAIL {failure}", file=sys.stderr)
        return 1
    log("all Portal checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
