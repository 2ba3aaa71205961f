"""A login through the hosted page in Chromium, driven by Selenium, to a page Apache httpd protects with
mod_auth_openidc (an OpenID-certified relying party nobody here wrote). Started by run.sh, which starts the
server (its public URL is the TLS front this script's Apache serves) and makes the TLS certificate.

1. Password + TOTP: a CosyncAuth app whose second factor is Google TOTP; a user made through the admin API,
   TOTP enabled through the end-user API (setTwoFactorGoogleVerification), codes computed here (RFC 6238).
   The browser opens the protected page, is sent to the hosted page, types the handle and the password,
   then the TOTP code, and lands on the protected page, which must show the user's sub and email.
2. Passkey: an AppKey app (RP ID cosync.localhost). Chromium's virtual authenticator (CTAP2, internal,
   resident keys, user verification) holds the user's passkey; it is registered through the hosted page
   when the page offers that, else through the AppKey API (signup, signupConfirm, signupComplete) from a
   page of the issuer's origin. Then the same round trip through mod_auth_openidc with the passkey.
3. axe-core (axe-selenium-python) on the hosted login page: no violation of impact serious or critical;
   the others are printed.

A failure saves a screenshot and the page source under $SCREENSHOT_DIR (default /tmp) and says which URL
the browser was on and what it showed. Exit status 0 when every check passed.
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import uuid

from selenium import webdriver
from selenium.common.exceptions import JavascriptException, TimeoutException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.virtual_authenticator import VirtualAuthenticatorOptions
from selenium.webdriver.support.ui import WebDriverWait

HERE = os.path.dirname(os.path.abspath(__file__))
PASSWORD = "Browser-Test-Passw0rd!"
SCOPES = ["openid", "email", "profile"]
RP_ID = "cosync.localhost"


class CheckFailed(Exception):
    pass


def log(message):
    print(f"browser: {message}", flush=True)


# --- HTTP to the server (admin and end-user APIs), straight to its plain port -------------------------

class Server:
    def __init__(self, base, operator_token):
        self.base = base.rstrip("/")
        self.admin_headers = {"Authorization": f"Bearer {operator_token}"}

    def call(self, method, path, body=None, headers=None, form=False, want=None):
        hdrs = dict(headers or {})
        data = None
        if body is not None:
            if form:
                data = urllib.parse.urlencode(body).encode()
                hdrs["Content-Type"] = "application/x-www-form-urlencoded"
            else:
                data = json.dumps(body).encode()
                hdrs["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                status, raw = reply.status, reply.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        try:
            value = json.loads(raw) if raw else None
        except ValueError:
            value = raw.decode("utf-8", "replace")
        if want is not None and status != want:
            raise CheckFailed(f"{method} {path}: HTTP {status} {str(value)[:500]}")
        return status, value

    def admin(self, method, path, body=None, want=None):
        return self.call(method, "/admin/v1" + path, body, self.admin_headers, want=want)


def register_client(server, app_id, redirect_uri):
    """A confidential client for mod_auth_openidc (client_secret_basic), through the admin API."""
    body = {
        "name": "Apache mod_auth_openidc",
        "kind": "confidential",
        "tokenEndpointAuthMethod": "client_secret_basic",
        "redirectUris": [redirect_uri],
        "grantTypes": ["authorization_code", "refresh_token"],
        "scopes": SCOPES,
        "dpopRequired": False,
    }
    _, client = server.admin("POST", f"/apps/{app_id}/oauth/clients", body, want=201)
    return client["clientId"], client["clientSecret"]


# --- TOTP (RFC 6238: HMAC-SHA1, 6 digits, 30 s) ---------------------------------------------------------

def totp(secret_display, at=None):
    letters = re.sub(r"[^A-Za-z2-7]", "", secret_display).upper()
    key = base64.b32decode(letters + "=" * (-len(letters) % 8))
    counter = int((time.time() if at is None else at) // 30)
    digest = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    number = struct.unpack(">I", digest[offset:offset + 4])[0] & 0x7FFFFFFF
    return f"{number % 1_000_000:06d}"


def fresh_totp(secret_display):
    """A code with at least 5 s left in its step (the server takes each step once, ±1 step)."""
    if 30 - time.time() % 30 < 5:
        time.sleep(30 - time.time() % 30 + 0.2)
    return totp(secret_display)


# --- Apache ----------------------------------------------------------------------------------------------

class Apache:
    def __init__(self, work, env):
        self.work = work
        self.env = env
        self.process = None

    def start(self):
        os.makedirs(os.path.join(self.work, "run"), exist_ok=True)
        os.makedirs(os.path.join(self.work, "htdocs", "protected"), exist_ok=True)
        shutil.copy(os.path.join(HERE, "claims.shtml"), os.path.join(self.work, "htdocs", "protected", "claims.shtml"))
        command = ["apache2", "-f", os.path.join(HERE, "httpd.conf"), "-DFOREGROUND"]
        if os.geteuid() == 0:
            # An unprivileged httpd: everything it writes is in WORK, handed to www-data.
            for root, dirs, files in os.walk(self.work):
                for name in dirs + files:
                    shutil.chown(os.path.join(root, name), "www-data", "www-data")
            shutil.chown(self.work, "www-data", "www-data")
            command = ["setpriv", "--reuid=www-data", "--regid=www-data", "--clear-groups", "--"] + command
        env = dict(os.environ, **self.env)
        check = subprocess.run(command[:-1] + ["-t"], env=env, capture_output=True, text=True)
        if check.returncode != 0:
            raise CheckFailed(f"apache2 -t refused the configuration:\n{check.stderr}{check.stdout}")
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(100):
            if self.process.poll() is not None:
                raise CheckFailed(f"apache2 exited with {self.process.returncode}: {self.process.stderr.read().decode()}\n{self.error_log()}")
            if all(port_open(int(self.env[name])) for name in ("TLS_PORT", "RP_TOTP_PORT", "RP_PASSKEY_PORT")):
                return
            time.sleep(0.1)
        raise CheckFailed("apache2 did not listen within 10 s\n" + self.error_log())

    def error_log(self, lines=60):
        try:
            with open(os.path.join(self.work, "error.log"), encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no error.log)"

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def port_open(port):
    import socket
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


# --- the browser -----------------------------------------------------------------------------------------

class Browser:
    def __init__(self, spki, shots):
        options = webdriver.ChromeOptions()
        options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
        for argument in (
            "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,1000",
            "--no-first-run", "--disable-extensions", "--disable-background-networking", "--lang=en-US",
            # The issuer's certificate (made for this run) is accepted by its public key, so the page is a
            # secure context without certificate errors, as WebAuthn requires.
            f"--ignore-certificate-errors-spki-list={spki}",
        ):
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
        self.driver = webdriver.Chrome(options=options, service=Service(driver_path))
        self.driver.set_page_load_timeout(30)
        self.shots = shots
        self.failures = []

    def quit(self):
        try:
            self.driver.quit()
        except WebDriverException:
            pass

    def wait(self, condition, what, timeout=20):
        """Waits for `condition`; a browser error page (an HTTP error without a body, a refused connection)
        ends the wait at once."""
        def check(d):
            found = condition(d)
            if found:
                return found
            if d.execute_script("return document.documentURI").startswith("chrome-error:"):
                raise CheckFailed(f"the browser shows an error page while waiting for {what}")
            return None
        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.2).until(check)
        except TimeoutException:
            raise CheckFailed(f"timed out after {timeout} s waiting for {what}") from None

    def snapshot(self, name):
        """Screenshot + page source + what the page says, for the report."""
        os.makedirs(self.shots, exist_ok=True)
        png = os.path.join(self.shots, f"cosync-browser-{name}.png")
        html = os.path.join(self.shots, f"cosync-browser-{name}.html")
        try:
            self.driver.save_screenshot(png)
            with open(html, "w", encoding="utf-8") as f:
                f.write(self.driver.page_source)
            text = self.driver.find_element(By.TAG_NAME, "body").text
        except WebDriverException as error:
            return f"(no snapshot: {error.msg})"
        console = ""
        try:
            entries = [e["message"] for e in self.driver.get_log("browser")][-10:]
            console = ("\n  console: " + "\n  console: ".join(entries)) if entries else ""
        except WebDriverException:
            pass
        return (f"at {self.driver.current_url}\n  title: {self.driver.title!r}\n  text: {text[:800]!r}{console}\n"
                f"  screenshot: {png}\n  source: {html}")

    # -- finding the hosted page's fields without knowing its exact markup --
    def first(self, selectors, scope=None, visible=True):
        scope = scope or self.driver
        for selector in selectors:
            by = By.XPATH if selector.startswith("/") or selector.startswith(".//") else By.CSS_SELECTOR
            for element in scope.find_elements(by, selector):
                if not visible or element.is_displayed():
                    return element
        return None

    def field(self, selectors, what, timeout=15):
        return self.wait(lambda d: self.first(selectors), what, timeout)


HANDLE_FIELDS = ["input[name=handle]", "input[autocomplete~=username]", "input[type=email]", "input[name=username]",
                 "input[name=email]", "input[name=login]"]
PASSWORD_FIELDS = ["input[type=password]"]
CODE_FIELDS = ["input[autocomplete=one-time-code]", "input[name=code]", "input[name=totp]", "input[name=otp]",
               "input[inputmode=numeric]"]
# The hosted page's passkey block (HostedPasskeyRoutes.swift, "Stable contract").
PASSKEY_BLOCK = "#cosync-passkey"
PASSKEY_STATUS = "#passkey-status"


def submit(browser, field):
    """Submits the form a field belongs to, through its own submit button when it has one."""
    form = field.find_element(By.XPATH, "ancestor::form")
    button = browser.first(["button[type=submit]", "input[type=submit]", "button:not([type])"], scope=form)
    if button is not None:
        button.click()
    else:
        form.submit()


def claims_page(browser, rp_base):
    """Waits for the protected page and answers the claims it shows."""
    browser.wait(lambda d: d.current_url.startswith(rp_base + "/protected/claims.shtml")
                 and d.find_elements(By.ID, "sub"), "the protected page", 30)
    shown = {}
    for name in ("remote-user", "sub", "email", "iss", "aud", "amr", "auth-time", "sid"):
        shown[name] = browser.driver.find_element(By.ID, name).text.strip()
    return shown


def expect_claims(shown, user_id, handle, issuer, client_id):
    problems = []
    if shown["sub"].lower() != user_id.lower():
        problems.append(f"sub {shown['sub']!r} is not the user id {user_id!r}")
    if shown["email"].lower() != handle.lower():
        problems.append(f"email {shown['email']!r} is not the handle {handle!r}")
    if shown["iss"] != issuer:
        problems.append(f"iss {shown['iss']!r} is not {issuer!r}")
    if client_id not in shown["aud"]:
        problems.append(f"aud {shown['aud']!r} does not name the client {client_id!r}")
    if problems:
        raise CheckFailed("the protected page shows the wrong claims: " + "; ".join(problems) + f" (page: {shown})")


# --- axe-core --------------------------------------------------------------------------------------------

def accessibility(browser, label, report):
    from axe_selenium_python import Axe
    axe = Axe(browser.driver)
    try:
        axe.inject()
        # The axe-core this package bundles (3.1.1, 2018) predates three autofill rules of the HTML standard
        # that later axe-core releases follow: the token one-time-code (a TOTP or SMS code field);
        # autocomplete="username" on an e-mail input (whatwg/html 5bad12a; axe-core#2727, #2896); and a
        # trailing webauthn token (whatwg/html#8006; axe-core#3854, #3866). The first two are told to axe
        # through its own check options; for the third, the trailing " webauthn" is taken off while axe runs
        # (and put back), so axe judges the rest of the attribute. Nothing else is relaxed.
        browser.driver.execute_script(
            "axe.configure({checks: ["
            "{id: 'autocomplete-valid', options: {standaloneTerms: ['one-time-code']}},"
            "{id: 'autocomplete-appropriate', options: {username: ['text', 'search', 'email']}}]});"
            "document.querySelectorAll('[autocomplete]').forEach(function (e) {"
            "  var v = e.getAttribute('autocomplete');"
            "  if (/\\swebauthn$/i.test(v)) { e.setAttribute('data-axe-autocomplete', v); e.setAttribute('autocomplete', v.replace(/\\s+webauthn$/i, '')); }"
            "});")
        results = axe.run()
        browser.driver.execute_script(
            "document.querySelectorAll('[data-axe-autocomplete]').forEach(function (e) {"
            "  e.setAttribute('autocomplete', e.getAttribute('data-axe-autocomplete')); e.removeAttribute('data-axe-autocomplete');"
            "});")
    except (JavascriptException, WebDriverException) as error:
        raise CheckFailed(f"axe-core could not run on {browser.driver.current_url}: {error.msg}") from None
    violations = results.get("violations", [])
    serious = [v for v in violations if v.get("impact") in ("serious", "critical")]
    for v in violations:
        targets = ", ".join(" ".join(n.get("target", [])) for n in v.get("nodes", [])[:5])
        report.append(f"axe {label}: {v.get('impact')} {v['id']} ({v.get('help')}) on {targets}")
    log(f"axe-core {label}: {len(results.get('passes', []))} rules pass, {len(violations)} violations "
        f"({len(serious)} serious or critical)")
    if serious:
        details = "; ".join(f"{v['id']}: {v.get('help')} on " + ", ".join(n.get("html", "")[:200] for n in v.get("nodes", [])[:3])
                            for v in serious)
        raise CheckFailed(f"axe-core finds {len(serious)} serious or critical violations on the {label}: {details}\n  "
                          + browser.snapshot("axe-" + re.sub(r"[^a-z0-9]+", "-", label.lower())))


# --- the flows -------------------------------------------------------------------------------------------

def setup_totp_app(server, args):
    _, app = server.admin("POST", "/apps", {"name": f"Browser TOTP {uuid.uuid4().hex[:8]}", "twoFactorVerification": "google"},
                          want=201)
    app_id, app_token = app["appId"], app["appToken"]
    handle = f"totp-{uuid.uuid4().hex[:8]}@example.com"
    _, user = server.admin("POST", f"/apps/{app_id}/users", {"handle": handle, "password": PASSWORD}, want=201)
    md5 = hashlib.md5(PASSWORD.encode()).hexdigest()
    _, tokens = server.call("POST", "/api/appuser/login", {"handle": handle, "password": md5}, {"app-token": app_token},
                            form=True, want=200)
    _, enabled = server.call("POST", "/api/appuser/setTwoFactorGoogleVerification", {"twoFactor": "true"},
                             {"access-token": tokens["access-token"]}, form=True, want=200)
    secret = enabled["googleSecretKey"]
    redirect = f"http://127.0.0.1:{args.rp_totp_port}/protected/redirect_uri"
    client_id, client_secret = register_client(server, app_id, redirect)
    return {"appId": app_id, "userId": user["userId"], "handle": handle, "secret": secret,
            "clientId": client_id, "clientSecret": client_secret, "issuer": f"{args.public_url}/apps/{app_id}"}


def setup_passkey_app(server, args):
    origin = args.public_url
    _, app = server.admin("POST", "/apps", {
        "name": f"Browser passkey {uuid.uuid4().hex[:8]}", "product": "appKey", "rpId": RP_ID, "rpName": "CosyncAuth browser test",
        "allowedOrigins": [origin], "userVerification": "required"}, want=201)
    app_id = app["appId"]
    redirect = f"http://127.0.0.1:{args.rp_passkey_port}/protected/redirect_uri"
    client_id, client_secret = register_client(server, app_id, redirect)
    return {"appId": app_id, "appToken": app["appToken"], "handle": f"passkey-{uuid.uuid4().hex[:8]}@example.com",
            "clientId": client_id, "clientSecret": client_secret, "issuer": f"{args.public_url}/apps/{app_id}"}


def login_with_totp(browser, server, ctx, args, report):
    rp = f"http://127.0.0.1:{args.rp_totp_port}"
    browser.driver.get(rp + "/protected/claims.shtml")
    browser.wait(lambda d: d.current_url.startswith(ctx["issuer"] + "/"), f"the redirect to the hosted page under {ctx['issuer']}", 20)
    handle_field = browser.field(HANDLE_FIELDS, "the handle field of the hosted login page")
    log(f"hosted login page: {browser.driver.current_url.split('?')[0]} ({browser.driver.title!r})")
    accessibility(browser, "hosted login page", report)
    handle_field.send_keys(ctx["handle"])
    password_field = browser.first(PASSWORD_FIELDS)
    if password_field is None:
        # A page that asks for the handle first, then the password.
        submit(browser, handle_field)
        password_field = browser.field(PASSWORD_FIELDS, "the password field")
    password_field.send_keys(PASSWORD)
    submit(browser, password_field)
    code_field = browser.field(CODE_FIELDS, "the TOTP code form", 20)
    log(f"second-factor page: {browser.driver.current_url.split('?')[0]}")
    try:
        accessibility(browser, "second-factor page", report)
    except CheckFailed as error:
        browser.failures.append(str(error))
    code_field.send_keys(fresh_totp(ctx["secret"]))
    submit(browser, code_field)
    shown = claims_page(browser, rp)
    log(f"protected page (password + TOTP): {shown}")
    expect_claims(shown, ctx["userId"], ctx["handle"], ctx["issuer"], ctx["clientId"])
    amr = set(shown["amr"].split(","))
    if not {"pwd", "otp"} <= amr:
        raise CheckFailed(f"amr {shown['amr']!r} does not say password and one-time code (RFC 8176 pwd, otp)")


# A passkey signup through the AppKey API, run in a page of the issuer's origin so that the credential is
# made for that origin (clientDataJSON.origin) by the virtual authenticator. Plain fetch + WebAuthn.
SIGNUP_JS = r"""
const [appToken, handle, done] = arguments;
const b64u = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
const unb64u = (s) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((s.length + 3) % 4)), c => c.charCodeAt(0));
const call = async (path, headers, body) => {
  const r = await fetch('/api/appuser/' + path, {method: 'POST', headers: Object.assign({'Content-Type': 'application/json'}, headers), body: JSON.stringify(body)});
  const text = await r.text();
  if (r.status !== 200) throw new Error(path + ': HTTP ' + r.status + ' ' + text);
  return JSON.parse(text);
};
(async () => {
  const options = await call('signup', {'app-token': appToken}, {handle, displayName: 'Browser Passkey'});
  const credential = await navigator.credentials.create({publicKey: {
    challenge: unb64u(options.challenge), rp: options.rp,
    user: {id: unb64u(options.user.id), name: options.user.name, displayName: options.user.displayName},
    pubKeyCredParams: options.pubKeyCredParams, timeout: options.timeout, attestation: 'none',
    authenticatorSelection: {residentKey: 'required', requireResidentKey: true, userVerification: 'required'}}});
  const confirmed = await call('signupConfirm', {'app-token': appToken}, {handle, id: credential.id, rawId: b64u(credential.rawId), type: 'public-key',
    response: {attestationObject: b64u(credential.response.attestationObject), clientDataJSON: b64u(credential.response.clientDataJSON),
               transports: credential.response.getTransports ? credential.response.getTransports() : []}});
  done({ok: true, signupToken: confirmed['signup-token']});
})().catch(e => done({ok: false, error: String(e)}));
"""

COMPLETE_JS = r"""
const [signupToken, code, done] = arguments;
fetch('/api/appuser/signupComplete', {method: 'POST', headers: {'Content-Type': 'application/json', 'signup-token': signupToken}, body: JSON.stringify({code})})
  .then(async r => done({status: r.status, body: await r.text()}), e => done({status: 0, body: String(e)}));
"""


def signup_code(server, app_id, handle):
    """The code the server e-mailed for a pending signup (the log transport keeps it readable)."""
    for _ in range(50):
        _, answer = server.admin("GET", f"/apps/{app_id}/messages?to={urllib.parse.quote(handle)}&limit=10", want=200)
        for message in answer.get("messages", []):
            found = re.search(r"\b(\d{6})\b", message.get("body", "") or "")
            if found:
                return found.group(1)
        time.sleep(0.1)
    raise CheckFailed(f"no signup code e-mailed to {handle}")


def register_passkey_through_api(browser, server, ctx):
    """The user and its passkey through the AppKey API (K3-K5), for a page that offers no passkey signup."""
    browser.driver.get(ctx["issuer"] + "/.well-known/openid-configuration")
    answer = browser.driver.execute_async_script(SIGNUP_JS, ctx["appToken"], ctx["handle"])
    if not answer.get("ok"):
        raise CheckFailed(f"passkey signup through the AppKey API failed: {answer.get('error')}")
    code = signup_code(server, ctx["appId"], ctx["handle"])
    done = browser.driver.execute_async_script(COMPLETE_JS, answer["signupToken"], code)
    if done["status"] != 200:
        raise CheckFailed(f"signupComplete: HTTP {done['status']} {done['body'][:300]}")
    log(f"passkey user {ctx['handle']} signed up through the AppKey API (the page offers no passkey signup)")


def user_id(server, app_id, handle):
    _, found = server.admin("GET", f"/apps/{app_id}/users?query={urllib.parse.quote(handle)}", want=200)
    ids = [u["userId"] for u in found.get("users", []) if u.get("handle") == handle]
    if len(ids) != 1:
        raise CheckFailed(f"user {handle} not found through the admin API: {str(found)[:300]}")
    return ids[0]


def passkey_block(browser, ctx, rp):
    """Opens the protected page in a browser with no session, and waits for the hosted page's passkey block."""
    # No cookie left from an earlier round (the relying party's session, the hosted page's browser session).
    browser.driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    browser.driver.get(rp + "/protected/claims.shtml")
    browser.wait(lambda d: d.current_url.startswith(ctx["issuer"] + "/"), f"the redirect to the hosted page under {ctx['issuer']}", 20)
    block = browser.wait(lambda d: browser.first([PASSKEY_BLOCK]), "the passkey block of the hosted page (#cosync-passkey)", 15)
    return block


def passkey_status(browser):
    """What the passkey block's status line shows (empty when hidden)."""
    status = browser.first([PASSKEY_STATUS])
    return status.text.strip() if status is not None else ""


def unless_passkey_refused(browser, selector):
    """A wait condition: the element once visible; a refusal on the status line ends the wait at once."""
    def condition(d):
        found = browser.first([selector])
        if found is not None:
            return found
        if d.current_url.startswith("https://") and passkey_status(browser):
            # The page's script shows the next step and then its status line ("We sent you a code"): a status
            # read after the element was looked for may belong to the step that just appeared. Look again.
            found = browser.first([selector])
            if found is not None:
                return found
            raise CheckFailed(f"the passkey block says {passkey_status(browser)!r} (while waiting for {selector})")
        return None
    return condition


def login_with_passkey(browser, server, ctx, args, report):
    rp = f"http://127.0.0.1:{args.rp_passkey_port}"
    passkey_block(browser, ctx, rp)
    log(f"hosted login page (AppKey app): {browser.driver.current_url.split('?')[0]} ({browser.driver.title!r})")
    try:
        accessibility(browser, "hosted login page of the AppKey app", report)
    except CheckFailed as error:
        browser.failures.append(str(error))

    signup_sid = None
    if browser.first(["#passkey-sign-up"]) is not None:
        # Passkey signup on the hosted page: the virtual authenticator makes the credential, the code the
        # server e-mailed completes the signup, and the browser goes on to the relying party.
        browser.driver.find_element(By.ID, "passkey-signup-handle").send_keys(ctx["handle"])
        browser.driver.find_element(By.ID, "passkey-display-name").send_keys("Browser Passkey")
        browser.driver.find_element(By.ID, "passkey-sign-up").click()
        code_field = browser.wait(unless_passkey_refused(browser, "#passkey-code"), "the signup code step of the passkey block", 20)
        code_field.send_keys(signup_code(server, ctx["appId"], ctx["handle"]))
        browser.driver.find_element(By.ID, "passkey-complete-signup").click()
        shown = claims_page(browser, rp)
        ctx["userId"] = user_id(server, ctx["appId"], ctx["handle"])
        log(f"protected page (passkey signup on the hosted page): {shown}")
        expect_claims(shown, ctx["userId"], ctx["handle"], ctx["issuer"], ctx["clientId"])
        signup_sid = shown["sid"]
    else:
        register_passkey_through_api(browser, server, ctx)
        ctx["userId"] = user_id(server, ctx["appId"], ctx["handle"])
    credentials = browser.driver.get_credentials()
    if len(credentials) != 1 or not credentials[0].is_resident_credential:
        raise CheckFailed(f"the virtual authenticator holds {len(credentials)} credentials after the signup (one resident key expected)")
    log(f"passkey user {ctx['handle']} ({ctx['userId']}); the virtual authenticator holds its resident key")

    # A new sign-in with that passkey, from a browser with no session.
    passkey_block(browser, ctx, rp)
    handle_field = browser.driver.find_element(By.ID, "passkey-handle")
    handle_field.clear()
    handle_field.send_keys(ctx["handle"])
    browser.driver.find_element(By.ID, "passkey-sign-in").click()
    browser.wait(lambda d: not d.current_url.startswith(ctx["issuer"] + "/") or unless_passkey_refused(browser, "#no-such-element")(d),
                 "the hosted page to hand over to the relying party", 20)
    shown = claims_page(browser, rp)
    log(f"protected page (passkey sign-in): {shown}")
    expect_claims(shown, ctx["userId"], ctx["handle"], ctx["issuer"], ctx["clientId"])
    amr = set(shown["amr"].split(","))
    if not amr & {"hwk", "swk"} or "pwd" in amr:
        raise CheckFailed(f"amr {shown['amr']!r} does not say a key proof without a password (RFC 8176 hwk or swk)")
    if signup_sid is not None and shown["sid"] == signup_sid:
        raise CheckFailed(f"the passkey sign-in shows the signup's session {signup_sid}: it did not sign in again")
    if browser.driver.get_credentials()[0].sign_count < 1:
        raise CheckFailed("the virtual authenticator's passkey was not used (sign count 0)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True, help="the server's plain HTTP base (admin and end-user calls)")
    parser.add_argument("--public-url", required=True, help="the server's public URL (the TLS front)")
    parser.add_argument("--operator-token", required=True)
    parser.add_argument("--work", required=True, help="a directory for Apache's files")
    parser.add_argument("--server-port", required=True)
    parser.add_argument("--tls-port", required=True)
    parser.add_argument("--rp-totp-port", required=True)
    parser.add_argument("--rp-passkey-port", required=True)
    parser.add_argument("--tls-cert", required=True)
    parser.add_argument("--tls-key", required=True)
    parser.add_argument("--spki", required=True, help="base64 SHA-256 of the certificate's public key")
    parser.add_argument("--only", choices=["totp", "passkey"], help="run one flow")
    args = parser.parse_args()
    shots = os.environ.get("SCREENSHOT_DIR", "/tmp")
    server = Server(args.server, args.operator_token)
    failures, report = [], []

    setups = {}
    for name, setup in (("totp", setup_totp_app), ("passkey", setup_passkey_app)):
        if args.only in (None, name):
            try:
                setups[name] = setup(server, args)
            except CheckFailed as error:
                failures.append(f"{name} setup: {error}")
    if not setups:
        for failure in failures:
            print(f"FAIL {failure}", file=sys.stderr)
        return 1

    empty = {"clientId": "unused", "clientSecret": "unused", "issuer": f"{args.public_url}/apps/unused"}
    totp_ctx, passkey_ctx = setups.get("totp", empty), setups.get("passkey", empty)
    apache = Apache(args.work, {
        "WORK": args.work, "TLS_PORT": args.tls_port, "SERVER_PORT": args.server_port, "RP_TOTP_PORT": args.rp_totp_port,
        "RP_PASSKEY_PORT": args.rp_passkey_port, "TLS_CERT": args.tls_cert, "TLS_KEY": args.tls_key,
        "OIDC_PASSPHRASE": secrets.token_urlsafe(32),
        "TOTP_ISSUER": totp_ctx["issuer"], "TOTP_CLIENT_ID": totp_ctx["clientId"], "TOTP_CLIENT_SECRET": totp_ctx["clientSecret"],
        "PASSKEY_ISSUER": passkey_ctx["issuer"], "PASSKEY_CLIENT_ID": passkey_ctx["clientId"],
        "PASSKEY_CLIENT_SECRET": passkey_ctx["clientSecret"],
    })
    browser = None
    try:
        apache.start()
        browser = Browser(args.spki, shots)
        flows = []
        if "totp" in setups:
            flows.append(("password + TOTP", "totp", lambda: login_with_totp(browser, server, totp_ctx, args, report)))
        if "passkey" in setups:
            def passkey_flow():
                browser.driver.add_virtual_authenticator(VirtualAuthenticatorOptions(
                    protocol="ctap2", transport="internal", has_resident_key=True, has_user_verification=True,
                    is_user_consenting=True, is_user_verified=True))
                login_with_passkey(browser, server, passkey_ctx, args, report)
            flows.append(("passkey", "passkey", passkey_flow))
        for label, name, flow in flows:
            started = time.monotonic()
            try:
                flow()
                log(f"PASS {label} ({time.monotonic() - started:.1f} s)")
            except (CheckFailed, WebDriverException) as error:
                message = error.msg if isinstance(error, WebDriverException) else str(error)
                failures.append(f"{label}: {message}\n  {browser.snapshot(name)}")
                if os.environ.get("BROWSER_DEBUG"):
                    traceback.print_exc()
        failures.extend(browser.failures)
    except CheckFailed as error:
        failures.append(str(error))
    finally:
        if browser is not None:
            browser.quit()
        apache.stop()

    for line in report:
        log(line)
    if failures:
        log("---- Apache error log (last lines) ----\n" + apache.error_log(40))
        for failure in failures:
            print(f"FAIL {failure}", file=sys.stderr)
        return 1
    log("all browser checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
