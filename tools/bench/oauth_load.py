"""Load driver of tools/bench/oauth.sh: sets up what one OAuth scenario needs through the server's own
APIs, drives it for a fixed time, and prints one JSON object with the rate, the latencies and where the
machine's CPU went during the measured window (server, PostgreSQL, this load generator, everything else).

    oauth_load.py refresh  --base URL --public-url URL --operator-token T --server-pid P --pg-pid P [...]
    oauth_load.py dpop     (same options)
    oauth_load.py passkey  (same options)

refresh: FAMILIES users (end-user API signup), one refresh family each through RFC 8693 token exchange of
  the user's access-token (scope "openid offline_access"), then wrk (one thread per connection, so the
  Lua state of a thread is the state of its connection) walks the chains: every answer's refresh_token is
  the next request's. A refused refresh drops its family (presenting its token again would be reuse).
dpop: the same with a client that requires DPoP: each family has its own P-256 key, each request a fresh
  ES256 proof (jti, htm, htu, iat, the server's nonce); Python threads with keep-alive http.client.
passkey: an AppKey app's users each register a passkey (AppKey loginAnonymous, pure WebAuthn in Python),
  then each flow is a new browser: GET I/oauth/authorize (PKCE S256) -> the hosted page (binding cookie,
  CSRF token) -> its passkey endpoints (options, an ES256 assertion, finish) -> resume -> code -> token.

Each simulated browser or user comes from its own address (X-Forwarded-For; the server runs with
COSYNC_TRUSTED_PROXIES=1, as behind one proxy), as real clients do: the per-address limits then count
per client, as in production. Needs `cryptography` (ES256); standard library otherwise.
"""

import argparse
import base64
import hashlib
import http.client
import json
import os
import re
import resource
import secrets
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
PASSWORD_MD5 = hashlib.md5(b"bench-password").hexdigest()
REDIRECT = "com.cosync.bench:/callback"


class Failure(Exception):
    pass


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def address(n):
    """A distinct client address per simulated user or browser (10.0.0.0/8)."""
    n = n % (1 << 24)
    return f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"


# --- HTTP: one keep-alive connection per thread --------------------------------------------------------

class Client:
    def __init__(self, base):
        parsed = urllib.parse.urlsplit(base)
        self.host, self.port = parsed.hostname, parsed.port or 80
        self.conn = None

    def call(self, method, path, body=None, headers=None):
        """(status, headers as lower-case name -> [values], body bytes); reconnects once on a dropped connection."""
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            try:
                self.conn.request(method, path, body=body, headers=headers or {})
                reply = self.conn.getresponse()
                data = reply.read()
                fields = {}
                for name, value in reply.getheaders():
                    fields.setdefault(name.lower(), []).append(value)
                if reply.will_close:
                    self.conn.close()
                    self.conn = None
                return reply.status, fields, data
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise

    def json(self, method, path, obj=None, headers=None, want=200):
        h = {"Content-Type": "application/json", **(headers or {})}
        status, _, data = self.call(method, path, json.dumps(obj).encode() if obj is not None else None, h)
        if status != want:
            raise Failure(f"{method} {path}: HTTP {status} (wanted {want}): {data[:400]!r}")
        return json.loads(data) if data else None

    def form(self, path, fields, headers=None):
        h = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
        return self.call("POST", path, urllib.parse.urlencode(fields).encode(), h)


def cookies_of(fields):
    jar = {}
    for line in fields.get("set-cookie", []):
        name, _, rest = line.partition("=")
        jar[name.strip()] = rest.split(";", 1)[0]
    return jar


def local_path(location, public_url):
    """A Location as a path on this server (it may be absolute, under the public URL)."""
    if location.startswith(public_url):
        location = location[len(public_url):]
    if not location.startswith("/"):
        raise Failure(f"unexpected redirect target {location[:200]}")
    return location


# --- CPU accounting of the measured window ---------------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime
    except (OSError, IndexError, ValueError):
        return 0.0


def postgres_cpu(postmaster):
    """The postmaster and every process it started (backends, walwriter, ...)."""
    total = proc_cpu(postmaster)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == postmaster:
                    total += (int(fields[11]) + int(fields[12])) / TICK
            except (OSError, IndexError, ValueError):
                pass
    return total


def machine_busy():
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return (sum(values[:8]) - idle) / TICK


def own_cpu(children=False):
    usage = resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def psql(args, sql):
    """Runs sql through --psql (a psql command line for the bench database); rows as lists of strings."""
    run = subprocess.run(shlex.split(args.psql) + ["-XAtq", "-F", "\t", "-c", sql], capture_output=True, text=True)
    if run.returncode != 0:
        raise Failure(f"psql: {run.stderr.strip()[:300]}")
    return [line.split("\t") for line in run.stdout.splitlines() if line]


STATEMENTS = """SELECT calls, total_exec_time, regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY total_exec_time DESC"""


class Window:
    """CPU seconds used by the server, PostgreSQL, this driver (and its children) and the rest of the machine,
    and (with --psql) the statements PostgreSQL ran meanwhile (pg_stat_statements)."""

    def __init__(self, args):
        self.args = args
        self.statements = None

    def sample(self):
        return {"t": time.monotonic(), "server": proc_cpu(self.args.server_pid), "postgres": postgres_cpu(self.args.pg_pid),
                "client": own_cpu() + own_cpu(children=True), "busy": machine_busy(), "load": os.getloadavg()[0]}

    def __enter__(self):
        if self.args.psql:
            psql(self.args, "SELECT pg_stat_statements_reset()")
        self.start = self.sample()
        return self

    def __exit__(self, *exc):
        self.end = self.sample()
        if self.args.psql and exc[0] is None:
            rows = psql(self.args, STATEMENTS)
            self.statements = {"calls": sum(int(r[0]) for r in rows), "exec_ms": round(sum(float(r[1]) for r in rows), 1),
                               "top": [[int(r[0]), round(float(r[1]), 1), r[2][:110]] for r in rows[:6]]}
        return False

    def report(self):
        a, b = self.start, self.end
        wall = b["t"] - a["t"]
        used = {k: max(0.0, b[k] - a[k]) for k in ("server", "postgres", "client", "busy")}
        used["other"] = max(0.0, used["busy"] - used["server"] - used["postgres"] - used["client"])
        cores = os.cpu_count() or 1
        return {"wall": wall, "cores": cores, "cpu_seconds": {k: round(v, 2) for k, v in used.items()},
                "share": {k: round(v / (wall * cores), 3) for k, v in used.items()},
                "load_before": round(a["load"], 2), "load_after": round(b["load"], 2), "statements": self.statements}


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] * 1000, 2)


# --- set-up through the APIs ----------------------------------------------------------------------------

def admin(args):
    return {"Authorization": f"Bearer {args.operator_token}"}


def make_app(c, args, body):
    return c.json("POST", "/admin/v1/apps", body, admin(args), want=201)


def make_client(c, args, app_id, dpop):
    body = {"name": "Bench native app" + (" (DPoP)" if dpop else ""), "kind": "public", "tokenEndpointAuthMethod": "none",
            "redirectUris": [REDIRECT], "grantTypes": ["authorization_code", "refresh_token", EXCHANGE],
            "scopes": ["openid", "profile", "email", "offline_access"], "refreshGraceSeconds": 30, "dpopRequired": dpop}
    made = c.json("POST", f"/admin/v1/apps/{app_id}/oauth/clients", body, admin(args), want=201)
    if made.get("dpopRequired") != dpop:
        raise Failure(f"the client was made with dpopRequired {made.get('dpopRequired')!r}")
    return made["clientId"]


def parallel(count, workers, job):
    """Runs job(i) for i in range(count) on `workers` threads; each thread has its own Client in job's first argument."""
    results, errors = [None] * count, []
    lock = threading.Lock()
    cursor = iter(range(count))

    def run():
        c = None
        while True:
            with lock:
                i = next(cursor, None)
            if i is None or errors:
                return
            try:
                c = c or Client(ARGS.base)
                results[i] = job(c, i)
            except Exception as error:  # noqa: BLE001 (reported below)
                errors.append(error)
                return

    threads = [threading.Thread(target=run) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def signed_in_users(args, app_token, count, tag):
    """count users of a CosyncAuth app (signup flow none): their access-tokens (each names a new session)."""
    def signup(c, i):
        status, _, data = c.form("/api/appuser/signup", {"handle": f"{tag}{i}@bench.test", "password": PASSWORD_MD5},
                                 {"app-token": app_token, "X-Forwarded-For": address(0x100000 + i)})
        if status != 200:
            raise Failure(f"signup {i}: HTTP {status} {data[:300]!r}")
        return json.loads(data)["access-token"]
    return parallel(count, 4, signup)


class DPoPKey:
    def __init__(self):
        self.key = ec.generate_private_key(ec.SECP256R1())
        n = self.key.public_key().public_numbers()
        self.jwk = {"kty": "EC", "crv": "P-256", "x": b64url(n.x.to_bytes(32, "big")), "y": b64url(n.y.to_bytes(32, "big"))}

    def proof(self, htu, nonce):
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": self.jwk}
        claims = {"jti": secrets.token_urlsafe(16), "htm": "POST", "htu": htu, "iat": int(time.time())}
        if nonce:
            claims["nonce"] = nonce
        signing_input = b64url(json.dumps(header, separators=(",", ":")).encode()) + "." + \
            b64url(json.dumps(claims, separators=(",", ":")).encode())
        r, s = decode_dss_signature(self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


class Nonce:
    """The DPoP nonce the server gave last (RFC 9449 §8): every answer may carry the one to use next."""
    value = None
    lock = threading.Lock()

    @classmethod
    def update(cls, fields):
        for v in fields.get("dpop-nonce", []):
            with cls.lock:
                cls.value = v


def token_post(c, app_id, fields, proof=None):
    headers = {"DPoP": proof} if proof else {}
    status, answer_fields, data = c.form(f"/apps/{app_id}/oauth/token", fields, headers)
    Nonce.update(answer_fields)
    return status, data


def families(args, dpop):
    """An app, its client, FAMILIES users and one refresh family each (token exchange)."""
    c = Client(args.base)
    app = make_app(c, args, {"name": f"Bench OAuth {uuid.uuid4().hex[:8]}", "signupFlow": "none"})
    app_id = app["appId"]
    client_id = make_client(c, args, app_id, dpop)
    access = signed_in_users(args, app["appToken"], args.families, "dpop" if dpop else "user")
    htu = f"{args.public_url}/apps/{app_id}/oauth/token"

    def exchange(c, i):
        fields = {"grant_type": EXCHANGE, "subject_token": access[i], "subject_token_type": ACCESS_TOKEN_TYPE, "client_id": client_id,
                  "scope": "openid offline_access"}
        key = DPoPKey() if dpop else None
        for _ in range(3):
            status, data = token_post(c, app_id, fields, key.proof(htu, Nonce.value) if key else None)
            if status == 200:
                break
            if not (dpop and b"use_dpop_nonce" in data):
                raise Failure(f"token exchange {i}: HTTP {status} {data[:300]!r}")
        answer = json.loads(data)
        if "refresh_token" not in answer or ("id_token" not in answer):
            raise Failure(f"token exchange {i}: no refresh or ID token in {sorted(answer)}")
        if answer.get("token_type") != ("DPoP" if dpop else "Bearer"):
            raise Failure(f"token exchange {i}: token_type {answer.get('token_type')!r}")
        return {"refresh": answer["refresh_token"], "key": key}
    chains = parallel(args.families, 4, exchange)
    return app_id, client_id, htu, chains


# --- scenarios -----------------------------------------------------------------------------------------

WRK_LUA = r"""
-- One wrk thread per connection: a thread's Lua state is its connection's. Each thread walks its own
-- refresh families round robin; every 200 answers the token that replaces the one presented.
local chains = {CHAINS}
local threads = {}
local made = 0
function setup(thread)
  made = made + 1
  thread:set("chain", chains[made] or "")
  table.insert(threads, thread)
end
function init(args)
  tokens = {}
  for t in string.gmatch(chain, "%S+") do tokens[#tokens + 1] = t end
  at, last, ok, bad, dropped = 0, 0, 0, 0, 0
end
request = function()
  if not tokens or #tokens == 0 then
    if wrk.thread then wrk.thread:stop() end
    return wrk.format("GET", "/healthz")
  end
  at = at % #tokens + 1
  last = at
  return wrk.format("POST", "{PATH}", {["Content-Type"] = "application/x-www-form-urlencoded"},
    "grant_type=refresh_token&client_id={CLIENT}&refresh_token=" .. tokens[at])
end
response = function(status, headers, body)
  local next_token = status == 200 and string.match(body, '"refresh_token"%s*:%s*"([^"]+)"')
  if next_token then
    tokens[last] = next_token
    ok = ok + 1
  else
    bad = bad + 1
    if last > 0 and tokens[last] then table.remove(tokens, last); dropped = dropped + 1; at = 0 end
  end
end
function done(summary, latency, requests)
  local ok, bad, dropped = 0, 0, 0
  for _, t in ipairs(threads) do ok = ok + t:get("ok"); bad = bad + t:get("bad"); dropped = dropped + t:get("dropped") end
  io.write(string.format("RESULT %d %d %d %.6f %.3f %.3f\n", ok, bad, dropped, summary.duration / 1e6,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
"""


def scenario_refresh(args):
    app_id, client_id, _, chains = families(args, dpop=False)
    connections = min(args.connections, len(chains))
    per = [[] for _ in range(connections)]
    for i, chain in enumerate(chains):
        per[i % connections].append(chain["refresh"])
    lua = WRK_LUA.replace("{CHAINS}", "{" + ", ".join(json.dumps(" ".join(p)) for p in per) + "}") \
        .replace("{PATH}", f"/apps/{app_id}/oauth/token").replace("{CLIENT}", client_id)
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(lua)
        script = f.name
    try:
        with Window(args) as window:
            run = subprocess.run(["wrk", f"-t{connections}", f"-c{connections}", f"-d{int(args.seconds)}s", "--timeout", "10s", "-s", script,
                                  args.base], capture_output=True, text=True)
    finally:
        os.unlink(script)
    found = re.search(r"^RESULT (\d+) (\d+) (\d+) ([0-9.]+) ([0-9.]+) ([0-9.]+)$", run.stdout, re.M)
    if run.returncode != 0 or not found:
        raise Failure(f"wrk failed ({run.returncode}): {run.stdout[-800:]} {run.stderr[-800:]}")
    if os.environ.get("OAUTH_LOAD_DEBUG"):
        print(run.stdout, run.stderr, file=sys.stderr)
    ok, bad, dropped, seconds, p50, p99 = found.groups()
    report = window.report()
    return {"scenario": "refresh", "ok": int(ok), "errors": int(bad), "families_dropped": int(dropped), "families": len(chains),
            "connections": connections, "seconds": float(seconds), "rate": int(ok) / float(seconds), "p50_ms": float(p50),
            "p99_ms": float(p99), "client": "wrk (C + LuaJIT), one thread per connection", **report}


def timed_workers(args, count, body):
    """Runs body(worker index, client, record) on `count` threads until the deadline; record(ok, latency, error)."""
    stop = threading.Event()
    lock = threading.Lock()
    totals = {"ok": 0, "errors": {}, "latencies": []}

    def record(ok, latency, error=None):
        with lock:
            if ok:
                totals["ok"] += 1
                totals["latencies"].append(latency)
            else:
                totals["errors"][error] = totals["errors"].get(error, 0) + 1

    def run(index):
        c = Client(args.base)
        while not stop.is_set():
            try:
                body(index, c, record)
            except Failure as error:
                record(False, 0, str(error)[:160])
            except (OSError, http.client.HTTPException) as error:
                record(False, 0, type(error).__name__)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    with Window(args) as window:
        started = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        stop.set()
        for t in threads:
            t.join(60)
        seconds = time.monotonic() - started
    return totals, seconds, window.report()


def scenario_dpop(args):
    app_id, client_id, htu, chains = families(args, dpop=True)
    connections = min(args.connections, len(chains))
    per = [chains[i::connections] for i in range(connections)]
    cursor = [0] * connections

    def one(index, c, record):
        mine = per[index]
        if not mine:
            time.sleep(0.05)
            return
        cursor[index] = (cursor[index] + 1) % len(mine)
        chain = mine[cursor[index]]
        fields = {"grant_type": "refresh_token", "refresh_token": chain["refresh"], "client_id": client_id}
        t0 = time.monotonic()
        status, data = token_post(c, app_id, fields, chain["key"].proof(htu, Nonce.value))
        if status == 200:
            answer = json.loads(data)
            chain["refresh"] = answer["refresh_token"]
            record(answer.get("token_type") == "DPoP", time.monotonic() - t0, "token_type")
        elif b"use_dpop_nonce" in data:
            record(False, 0, "use_dpop_nonce (retried with the new nonce)")
        else:
            mine.remove(chain)
            record(False, 0, f"HTTP {status} {data[:100]!r} (family dropped)")
    totals, seconds, report = timed_workers(args, connections, one)
    return {"scenario": "dpop", "ok": totals["ok"], "errors": totals["errors"], "families": len(chains), "connections": connections,
            "seconds": seconds, "rate": totals["ok"] / seconds, "p50_ms": percentile(totals["latencies"], 50),
            "p99_ms": percentile(totals["latencies"], 99), "client": "Python threads, keep-alive http.client, cryptography ES256", **report}


# --- passkeys: WebAuthn in Python (the authenticator) ------------------------------------------------

def cbor(v):
    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        for ai, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
            if n < 1 << (8 * size):
                return bytes([major << 5 | ai]) + n.to_bytes(size, "big")
        raise ValueError(n)
    if isinstance(v, int):
        return head(0, v) if v >= 0 else head(1, -1 - v)
    if isinstance(v, bytes):
        return head(2, len(v)) + v
    if isinstance(v, str):
        return head(3, len(v.encode())) + v.encode()
    if isinstance(v, dict):
        return head(5, len(v)) + b"".join(cbor(k) + cbor(x) for k, x in v.items())
    raise TypeError(type(v))


class Authenticator:
    """One passkey: a P-256 key and a credential id, signing as a platform authenticator (UP, UV, BE, BS)."""

    def __init__(self, rp_id, origin):
        self.rp_id, self.origin = rp_id, origin
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential = secrets.token_bytes(20)

    def client_data(self, kind, challenge):
        return json.dumps({"type": kind, "challenge": challenge, "origin": self.origin}, separators=(",", ":")).encode()

    def registration(self, challenge):
        n = self.key.public_key().public_numbers()
        cose = cbor({1: 2, 3: -7, -1: 1, -2: n.x.to_bytes(32, "big"), -3: n.y.to_bytes(32, "big")})
        auth = hashlib.sha256(self.rp_id.encode()).digest() + bytes([0x5D]) + b"\x00" * 4 + b"\x00" * 16 + \
            len(self.credential).to_bytes(2, "big") + self.credential + cose
        return {"clientDataJSON": b64url(self.client_data("webauthn.create", challenge)),
                "attestationObject": b64url(cbor({"fmt": "none", "attStmt": {}, "authData": auth}))}

    def assertion(self, challenge):
        cd = self.client_data("webauthn.get", challenge)
        auth = hashlib.sha256(self.rp_id.encode()).digest() + bytes([0x1D]) + b"\x00" * 4
        signature = self.key.sign(auth + hashlib.sha256(cd).digest(), ec.ECDSA(hashes.SHA256()))
        return {"id": b64url(self.credential), "rawId": b64url(self.credential), "type": "public-key",
                "response": {"clientDataJSON": b64url(cd), "authenticatorData": b64url(auth), "signature": b64url(signature)}}


CSRF = re.compile(r'data-csrf="([^"]+)"')
REFERENCE = re.compile(r'data-request="([^"]+)"')


def scenario_passkey(args):
    origin = args.public_url.rstrip("/")
    host = urllib.parse.urlsplit(origin).hostname
    rp_id = host.split(".", 1)[1] if host.count(".") >= 2 else host
    c = Client(args.base)
    app = make_app(c, args, {"name": f"Bench passkeys {uuid.uuid4().hex[:8]}", "product": "appKey", "rpId": rp_id,
                             "rpName": "Bench", "allowedOrigins": [origin], "anonymousLoginEnabled": True})
    app_id, app_token = app["appId"], app["appToken"]
    client_id = make_client(c, args, app_id, dpop=False)
    issuer = f"/apps/{app_id}"

    def register(c, i):
        device = Authenticator(rp_id, origin)
        handle = "ANON_" + str(uuid.uuid4()).upper()
        headers = {"app-token": app_token, "X-Forwarded-For": address(0x200000 + i)}
        options = c.json("POST", "/api/appuser/loginAnonymous", {"handle": handle}, headers)
        c.json("POST", "/api/appuser/loginAnonymousComplete",
               {"handle": handle, "id": b64url(device.credential), "response": device.registration(options["challenge"])}, headers)
        return handle, device
    users = parallel(args.users, 4, register)
    flows = [0]
    lock = threading.Lock()
    steps = {}  # step -> [count, seconds]: where a flow's time goes

    def step(name, started):
        now = time.monotonic()
        with lock:
            entry = steps.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] += now - started
        return now

    def flow(index, c, record):
        with lock:
            flows[0] += 1
            n = flows[0]
        handle, device = users[n % len(users)]
        browser = {"X-Forwarded-For": address(n)}  # a new browser: no cookies yet, its own address
        verifier = secrets.token_urlsafe(48)
        challenge = b64url(hashlib.sha256(verifier.encode()).digest())
        state, nonce = secrets.token_urlsafe(12), secrets.token_urlsafe(12)
        t0 = time.monotonic()
        query = urllib.parse.urlencode({"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT,
                                        "scope": "openid offline_access", "state": state, "nonce": nonce,
                                        "code_challenge": challenge, "code_challenge_method": "S256"})
        status, fields, data = c.call("GET", f"{issuer}/oauth/authorize?{query}", headers=browser)
        t = step("authorize", t0)
        if status != 303:
            raise Failure(f"authorize: HTTP {status} {data[:120]!r}")
        jar = cookies_of(fields)
        cookie = "; ".join(f"{k}={v}" for k, v in jar.items())
        page = local_path(fields["location"][0], args.public_url)
        status, fields, data = c.call("GET", page, headers={**browser, "Cookie": cookie})
        t = step("page", t)
        html = data.decode(errors="replace")
        csrf, reference = CSRF.search(html), REFERENCE.search(html)
        if status != 200 or not csrf or not reference:
            raise Failure(f"hosted page: HTTP {status}, passkey block {'found' if csrf else 'missing'}")
        call = {**browser, "Cookie": cookie, "X-CSRF-Token": csrf.group(1)}
        request = reference.group(1)
        options = c.json("POST", f"{issuer}/oauth/login/passkey/options", {"request": request, "handle": handle}, call)
        t = step("passkey options", t)
        credential = device.assertion(options["publicKey"]["challenge"])
        t = step("(client: assertion)", t)
        finish = c.json("POST", f"{issuer}/oauth/login/passkey/finish", {"request": request, "handle": handle, "credential": credential}, call)
        t = step("passkey finish", t)
        status, fields, data = c.call("GET", local_path(finish["location"], args.public_url), headers={**browser, "Cookie": cookie})
        t = step("resume", t)
        target = (fields.get("location") or [""])[0]
        if status != 302 or not target.startswith(REDIRECT + "?"):
            raise Failure(f"resume: HTTP {status} to {target[:80]}")
        answer = dict(urllib.parse.parse_qsl(target.split("?", 1)[1]))
        if answer.get("state") != state or "code" not in answer:
            raise Failure("resume: no code or another state")
        status, data = token_post(c, app_id, {"grant_type": "authorization_code", "code": answer["code"], "redirect_uri": REDIRECT,
                                              "code_verifier": verifier, "client_id": client_id})
        step("token", t)
        if status != 200:
            raise Failure(f"token: HTTP {status} {data[:120]!r}")
        tokens = json.loads(data)
        ok = all(k in tokens for k in ("access_token", "id_token", "refresh_token"))
        record(ok, time.monotonic() - t0, "token answer without access, ID or refresh token")

    totals, seconds, report = timed_workers(args, args.connections, flow)
    return {"scenario": "passkey", "ok": totals["ok"], "errors": totals["errors"], "users": len(users), "connections": args.connections,
            "seconds": seconds, "rate": totals["ok"] / seconds, "p50_ms": percentile(totals["latencies"], 50),
            "p99_ms": percentile(totals["latencies"], 99), "requests_per_flow": 6,
            "steps_ms": {name: round(1000 * total / count, 1) for name, (count, total) in steps.items()},
            "client": "Python threads, keep-alive http.client, cryptography ES256", **report}


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["refresh", "dpop", "passkey"])
    parser.add_argument("--base", required=True, help="where the server listens (http://127.0.0.1:PORT)")
    parser.add_argument("--public-url", required=True, help="the server's COSYNC_PUBLIC_URL")
    parser.add_argument("--operator-token", required=True)
    parser.add_argument("--server-pid", type=int, required=True)
    parser.add_argument("--pg-pid", type=int, required=True, help="the postmaster's pid")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--families", type=int, default=64)
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--psql", help="a psql command line for the bench database, with pg_stat_statements installed")
    ARGS = parser.parse_args()
    ARGS.base = ARGS.base.rstrip("/")
    ARGS.public_url = ARGS.public_url.rstrip("/")
    run = {"refresh": scenario_refresh, "dpop": scenario_dpop, "passkey": scenario_passkey}[ARGS.scenario]
    try:
        print(json.dumps(run(ARGS)))
    except Failure as error:
        print(f"oauth_load.py {ARGS.scenario}: {error}", file=sys.stderr)
        sys.exit(1)


ARGS = None

if __name__ == "__main__":
    main()
