#!/usr/bin/env python3
"""Load driver and checks of Tests/system/multinode/run.sh (Python 3 standard library only).

Subcommands (run.sh calls them in this order):
  load     mixed end-user load through nginx for N seconds; writes every request (start, end, operation,
           outcome) and every acknowledged signup to a JSON file
  report   totals, and per fault (events file written by run.sh) the errors and the longest gaps
  serve    condition 4: every node answers /readyz 200 and a correct login
  lockout  condition 3: the (handle, address) and handle-wide login locks are shared by the nodes
  verify   conditions 1 and 2: acknowledged signups in the database exactly once; every outbox row sent
           and received by the fake SendGrid

Database access goes through psql: env MN_PSQL (path), MN_PGPORT, MN_DB.
"""
import argparse
import hashlib
import http.client
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.parse

# --------------------------------------------------------------------------------------------------
# helpers


def md5hex(text):
    return hashlib.md5(text.encode()).hexdigest()


def split_url(base):
    u = urllib.parse.urlsplit(base)
    return u.hostname, u.port or 80


def request(base, method, path, body=None, headers=None, timeout=10.0):
    """One HTTP request on a fresh connection. Returns (status, body_text); raises on transport errors."""
    host, port = split_url(base)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        hdrs = dict(headers or {})
        data = None
        if body is not None:
            if isinstance(body, dict):
                data = urllib.parse.urlencode(body).encode()
                hdrs.setdefault("Content-Type", "application/x-www-form-urlencoded")
            elif isinstance(body, (bytes, str)):
                data = body.encode() if isinstance(body, str) else body
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def as_json(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def psql(sql):
    cmd = [os.environ["MN_PSQL"], "-h", "127.0.0.1", "-p", os.environ["MN_PGPORT"], "-U", "postgres",
           "-d", os.environ["MN_DB"], "-tA", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines() if line != ""]


def app_ref(app_id):
    rows = psql(f"SELECT id FROM apps WHERE app_id = '{app_id}'")
    return int(rows[0][0])


def sql_text(s):
    return "'" + s.replace("'", "''") + "'"


def read_mails(path):
    """Every JSON line the fake SendGrid appended: (to, subject, text, cosync_message_id)."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # a line still being written
                m = json.loads(line)
                to = m["personalizations"][0]["to"][0]["email"]
                text = next((c["value"] for c in m.get("content", []) if c.get("type") == "text/plain"), "")
                mid = (m.get("custom_args") or {}).get("cosync_message_id")
                out.append((to, m.get("subject", ""), text, mid))
    except FileNotFoundError:
        pass
    return out


CODE_RE = re.compile(r"verification code for .* is (\d{6})\.")


class MailTail(threading.Thread):
    """Follows the fake SendGrid's file and remembers the signup code of each recipient."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.codes = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def run(self):
        pos = 0
        buf = ""
        while not self.stop.is_set():
            try:
                with open(self.path) as f:
                    f.seek(pos)
                    chunk = f.read()
                    pos = f.tell()
            except FileNotFoundError:
                chunk = ""
            if chunk:
                buf += chunk
                *lines, buf = buf.split("\n")
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        m = json.loads(line)
                        to = m["personalizations"][0]["to"][0]["email"].lower()
                        text = next((c["value"] for c in m.get("content", []) if c.get("type") == "text/plain"), "")
                    except (ValueError, KeyError, IndexError):
                        continue
                    found = CODE_RE.search(text)
                    if found:
                        with self.lock:
                            self.codes[to] = found.group(1)
            self.stop.wait(0.05)

    def code(self, handle):
        with self.lock:
            return self.codes.get(handle)


# --------------------------------------------------------------------------------------------------
# load


def timed_call(args, records, op, method, path, body, headers, expect):
    """Runs one request through args.base and appends (sent, answered, op, kind, detail) to records (kind
    "ok" when expect(status, text) is not None); returns expect's value, or None. After a failure it
    pauses args.error_pause seconds (a client does not try again in a busy loop of instant 502s)."""
    t0 = time.time()
    kind, detail, value = "ok", "", None
    try:
        status, text = request(args.base, method, path, body, headers, args.timeout)
        value = expect(status, text)
        if value is None:
            kind = f"http {status}" if status >= 500 else "unexpected answer"
            detail = f"{status} {text[:120]}"
    except (TimeoutError, OSError) as e:  # socket.timeout is TimeoutError; refused/reset are OSError
        kind = "timeout" if isinstance(e, TimeoutError) or "timed out" in str(e) else "connection"
        detail = f"{type(e).__name__}: {e}"
    except http.client.HTTPException as e:
        kind, detail = "connection", f"{type(e).__name__}: {e}"
    t1 = time.time()
    records.append((round(t0, 4), round(t1, 4), op, kind, detail))  # a shared list (append is atomic)
    if kind != "ok" and args.error_pause > 0:
        time.sleep(args.error_pause)
    return value


class Worker(threading.Thread):
    """A closed loop of end-user requests on its own users (no state is shared between workers)."""

    def __init__(self, wid, args, mails, deadline, records, acks):
        super().__init__(daemon=True)
        self.wid = wid
        self.args = args
        self.mails = mails
        self.deadline = deadline
        self.records = records  # shared list (append is atomic)
        self.acks = acks
        self.rng = random.Random(args.seed * 1000 + wid)
        self.n = 0
        self.awaiting = []   # handles whose signup was sent (acknowledged or not), not yet completed
        self.users = []      # completed users: dict(handle, pw, addr, token, wrong)

    def addr(self, n):
        # a client address of its own per user (nginx appends 127.0.0.1, which the nodes trust), so
        # that the per-address login counter of the load never reaches its limit
        return f"10.{self.wid + 1}.{(n >> 8) & 255}.{n & 255}"

    def call(self, op, method, path, body, headers, expect):
        """Runs one request, records it; returns the parsed answer when it was the expected one."""
        return timed_call(self.args, self.records, op, method, path, body, headers, expect)

    def step(self):
        app = {"app-token": self.args.app_token}
        rng = self.rng
        # 1. complete a signup whose code arrived
        for i, (handle, pw, addr, tries) in enumerate(self.awaiting):
            code = self.mails.code(handle)
            if code:
                del self.awaiting[i]
                def exp(s, t):
                    j = as_json(t)
                    if s == 200 and isinstance(j, dict) and isinstance(j.get("access-token"), str):
                        return j
                    if s == 400 and isinstance(j, dict) and j.get("code") == 601:
                        return "already"  # an earlier completion whose answer was lost
                    return None
                r = self.call("completeSignup", "POST", "/api/appuser/completeSignup",
                              {"handle": handle, "code": code}, {**app, "X-Forwarded-For": addr}, exp)
                if isinstance(r, dict):
                    self.acks["completed"].append(handle)
                    self.users.append({"handle": handle, "pw": pw, "addr": addr, "token": r["access-token"], "wrong": 0})
                elif r == "already":
                    self.acks["completed_unacknowledged"].append(handle)
                    self.users.append({"handle": handle, "pw": pw, "addr": addr, "token": None, "wrong": 0})
                elif tries < 3:
                    self.awaiting.append((handle, pw, addr, tries + 1))  # try again later
                return
        roll = rng.random()
        if roll < 0.30 or not self.users:
            # 2. a new signup
            self.n += 1
            handle = f"{self.args.prefix}-w{self.wid}-{self.n}@example.com"
            pw = md5hex(f"pw-{handle}")
            addr = self.addr(self.n)
            r = self.call("signup", "POST", "/api/appuser/signup", {"handle": handle, "password": pw},
                          {**app, "X-Forwarded-For": addr}, lambda s, t: True if (s == 200 and t == "true") else None)
            if r:
                self.acks["signup"].append(handle)
            else:
                self.acks["signup_unacknowledged"].append(handle)
            self.awaiting.append((handle, pw, addr, 0))  # a lost answer may still have committed: its code may come
            if len(self.awaiting) > 50:
                self.awaiting.pop(0)
            return
        user = rng.choice(self.users)
        hdr = {**app, "X-Forwarded-For": user["addr"]}
        if roll < 0.55 or user["token"] is None:
            # 3. login, right password
            def exp(s, t):
                j = as_json(t)
                return j if s == 200 and isinstance(j, dict) and isinstance(j.get("access-token"), str) else None
            r = self.call("login", "POST", "/api/appuser/login", {"handle": user["handle"], "password": user["pw"]}, hdr, exp)
            if r:
                user["token"] = r["access-token"]
                user["wrong"] = 0
        elif roll < 0.70 and user["wrong"] < 3:
            # 4. login, wrong password (answer 600); at most 3 in a row per user, far below its lock
            def exp(s, t):
                j = as_json(t)
                return True if s == 400 and isinstance(j, dict) and j.get("code") == 600 else None
            user["wrong"] += 1
            self.call("loginWrong", "POST", "/api/appuser/login", {"handle": user["handle"], "password": md5hex("wrong")}, hdr, exp)
        else:
            # 5. getUser with the access token
            def exp(s, t):
                j = as_json(t)
                return True if s == 200 and isinstance(j, dict) and j.get("handle") == user["handle"] else None
            self.call("getUser", "GET", "/api/appuser/getUser", None, {"access-token": user["token"], "X-Forwarded-For": user["addr"]}, exp)

    def run(self):
        while time.time() < self.deadline:
            self.step()
            if self.args.think > 0:
                time.sleep(self.args.think)


def run_load(args, more_threads=None):
    """Writes the start time to args.started, runs args.workers Workers (and the threads that
    more_threads(deadline, records) makes) for args.seconds, and returns the results: t0, t1, workers,
    base, records (every request), acks (signups and completions answered or not) and users (completed)."""
    mails = MailTail(args.mails)
    mails.start()
    records = []
    acks = {"signup": [], "signup_unacknowledged": [], "completed": [], "completed_unacknowledged": []}
    t0 = time.time()
    with open(args.started + ".tmp", "w") as f:
        f.write(f"{t0:.3f}\n")
    os.replace(args.started + ".tmp", args.started)
    deadline = t0 + args.seconds
    workers = [Worker(i, args, mails, deadline, records, acks) for i in range(args.workers)]
    threads = workers + (more_threads(deadline, records) if more_threads else [])
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t1 = time.time()
    mails.stop.set()
    # every user still waiting for a code stays pending: that is fine (its signup and e-mail are checked)
    return {"t0": t0, "t1": t1, "workers": args.workers, "base": args.base, "records": records,
            "acks": acks, "users": [u for w in workers for u in w.users]}


def cmd_load(args):
    data = run_load(args)
    with open(args.out, "w") as f:
        json.dump(data, f)
    print(f"load: {data['t1'] - data['t0']:.1f} s, {args.workers} workers, {len(data['records'])} requests through {args.base}")


# --------------------------------------------------------------------------------------------------
# report


def read_events(path):
    ev = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2:
                ev[parts[0]] = float(parts[1])
    return ev


def window_stats(records, start, end):
    """Errors among requests that ended in [start, end], the longest gap without a successful answer
    (successes by end time, counting from start to end), and the span of failing requests."""
    inside = [r for r in records if start <= r[1] <= end]
    errors = [r for r in inside if r[3] != "ok"]
    succ = sorted(r[1] for r in records if r[3] == "ok" and start <= r[1] <= end)
    points = [start] + succ + [end]
    gap, gap_at = 0.0, start
    for a, b in zip(points, points[1:]):
        if b - a > gap:
            gap, gap_at = b - a, a
    # longest failing span: from the send time of the first failed request of a run of failures (in
    # end-time order, no success in between) to the end time of its last failure
    span = 0.0
    run_start = None
    for r in sorted(inside, key=lambda r: r[1]):
        if r[3] == "ok":
            run_start = None
        else:
            run_start = r[0] if run_start is None else min(run_start, r[0])
            span = max(span, r[1] - run_start)
    return len(inside), len(errors), count_by(errors, lambda r: r[3]), gap, gap_at, span


def fmt_kinds(kinds):
    return ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items())) or "none"


def count_by(items, key):
    """How many items have each value of key(item), in the order of first appearance."""
    counts = {}
    for item in items:
        k = key(item)
        counts[k] = counts.get(k, 0) + 1
    return counts


def print_per_operation(recs):
    per_op = {}
    for r in recs:
        o = per_op.setdefault(r[2], [0, 0])
        o[0] += 1
        o[1] += r[3] != "ok"
    print("  per operation (requests/errors): " + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(per_op.items())))


def print_error_answers(errors, width):
    """The 8 most frequent error answers (operation, kind, the detail's first `width` characters)."""
    seen = count_by(errors, lambda r: f"{r[2]}: {r[3]}: " + " ".join(r[4].split())[:width])
    if seen:
        print("  error answers: " + "; ".join(f"{v}x {k}" for k, v in sorted(seen.items(), key=lambda kv: -kv[1])[:8]))


def print_acks(a):
    print(f"  acknowledged: signups {len(a['signup'])} (+{len(a['signup_unacknowledged'])} unanswered), "
          f"completed signups {len(a['completed'])} (+{len(a['completed_unacknowledged'])} found already completed)")


def cmd_report(args):
    data = json.load(open(args.results))
    ev = read_events(args.events)
    recs = data["records"]
    t0 = data["t0"]
    rel = lambda t: f"+{t - t0:.1f}s"
    errors = [r for r in recs if r[3] != "ok"]
    ok = len(recs) - len(errors)
    print(f"requests: {len(recs)} in {data['t1'] - t0:.1f} s ({len(recs) / max(1e-9, data['t1'] - t0):.0f}/s) with "
          f"{data['workers']} workers through nginx; expected answers {ok}; errors {len(errors)} ({fmt_kinds(count_by(errors, lambda r: r[3]))})")
    print_error_answers(errors, 70)
    print_per_operation(recs)
    print_acks(data["acks"])
    lat = sorted(r[1] - r[0] for r in recs if r[3] == "ok")
    if lat:
        print(f"  latency of expected answers: p50 {lat[len(lat) // 2] * 1000:.0f} ms, p99 {lat[int(len(lat) * 0.99)] * 1000:.0f} ms, "
              f"max {lat[-1] * 1000:.0f} ms")
    slow = sorted(recs, key=lambda r: r[0] - r[1])[:5]
    n_slow = sum(1 for r in recs if r[1] - r[0] > 5)
    print(f"  requests that took over 5 s: {n_slow}; slowest: " + "; ".join(
        f"{r[2]} sent {rel(r[0])} {r[1] - r[0]:.1f} s {r[3]}" for r in slow))
    print("  definitions: an error is a request without the expected answer (transport error, timeout after "
          f"{args.timeout:g} s, HTTP 5xx or another unexpected answer; a wrong password answered 600 is expected).")
    print("  fault window: from the fault to the moment the component serves again (node: its /readyz is 200;")
    print(f"  PostgreSQL: all 3 nodes' /readyz are 200) plus {args.grace:g} s. 'longest gap without success' = the longest")
    print("  interval in the window with no request ending in an expected answer (all workers together);")
    print("  'longest failing span' = the longest run of consecutive failing requests (by end time, no success")
    print("  in between), measured from the first one's send time to the last one's end time.")
    faults = [("node kill", "node_kill", "node_ready", f"node {args.victim} SIGKILL", "node_restart", "restarted"),
              ("PostgreSQL restart", "pg_stop", "pg_nodes_ready", "PostgreSQL stopped (-m immediate)", "pg_start", "started again")]
    for name, k0, k1, what, kmid, midwhat in faults:
        if k0 not in ev:
            print(f"fault '{name}': did not happen")
            continue
        recovered = ev.get(k1)
        end = (recovered if recovered else data["t1"]) + args.grace
        n, e, kinds, gap, gap_at, span = window_stats(recs, ev[k0], min(end, data["t1"]))
        rec_txt = f"serving again at {rel(recovered)} ({recovered - ev[k0]:.1f} s after the fault)" if recovered else "NOT serving again"
        mid = f", {midwhat} at {rel(ev[kmid])}" if kmid in ev else ""
        print(f"fault '{name}': {what} at {rel(ev[k0])}{mid}, {rec_txt}; window {rel(ev[k0])}..{rel(min(end, data['t1']))}")
        print(f"  requests ended in window {n}, errors {e} ({fmt_kinds(kinds)}); longest gap without success {gap:.2f} s "
              f"(from {rel(gap_at)}); longest failing span {span:.2f} s")
    outside = [r for r in recs if r[3] != "ok" and not any(
        k0 in ev and ev[k0] <= r[1] <= (ev.get(k1) or data["t1"]) + args.grace
        for _, k0, k1, *_ in faults)]
    print(f"errors outside the fault windows: {len(outside)}")
    for r in outside[:10]:
        print(f"  {rel(r[1])} {r[2]} {r[3]} {r[4]}")
    timeouts = [r for r in recs if r[3] == "timeout"]
    if timeouts:
        print(f"HUNG: {len(timeouts)} request(s) got no answer within {args.timeout:g} s (client timeout; a request that hangs "
              "instead of failing): " + "; ".join(f"{r[2]} sent {rel(r[0])}" for r in timeouts[:10]))
    else:
        print(f"every request was answered within the client timeout ({args.timeout:g} s): none hung")
    if args.nginx_log and os.path.exists(args.nginx_log):
        per, after, victim_after = {}, ev.get("node_restart"), 0
        for line in open(args.nginx_log):
            m = re.search(r"^(\S+) (\d+) .* upstream=(.*?) upstream_status=", line)
            if not m:
                continue
            last = m.group(3).split(",")[-1].strip() if m.group(3).strip() else "-"
            if last.startswith("127.0.0.1:") is False:
                last = f"none ({last}: no live upstream)"
            per[last] = per.get(last, 0) + 1
            if after and float(m.group(1)) > after and args.victim_port and last.endswith(":" + args.victim_port):
                victim_after += 1
        print("nginx: requests per upstream (the node that answered): " + ", ".join(f"{k} {v}" for k, v in sorted(per.items())))
        if args.victim_port:
            print(f"  node {args.victim} (127.0.0.1:{args.victim_port}) answered {victim_after} requests after its restart")
    if args.show_errors:
        for r in recs:
            if r[3] != "ok":
                print(f"  error {rel(r[0])}..{rel(r[1])} {r[2]}: {r[3]} {r[4]}")
    return 1 if timeouts else 0


# --------------------------------------------------------------------------------------------------
# condition 4: every node serves


def login_ok(base, app_token, handle, pw, addr, timeout):
    s, t = request(base, "POST", "/api/appuser/login", {"handle": handle, "password": pw},
                   {"app-token": app_token, "X-Forwarded-For": addr}, timeout)
    j = as_json(t)
    return s == 200 and isinstance(j, dict) and isinstance(j.get("access-token"), str), f"{s} {t[:100]}"


def cmd_serve(args):
    data = json.load(open(args.results))
    users = data["users"]
    ok = True
    if not users:
        print("  no completed user to log in with")
        return 1
    for i, node in enumerate(args.nodes.split(",")):
        u = users[i % len(users)]
        try:
            s, _ = request(node, "GET", "/readyz", timeout=args.timeout)
            good, detail = login_ok(node, args.app_token, u["handle"], u["pw"], u["addr"], args.timeout)
        except Exception as e:  # noqa: BLE001 - any failure is a failed check
            s, good, detail = None, False, f"{type(e).__name__}: {e}"
        print(f"  node {i + 1} {node}: /readyz {s}, login {'200 with access-token' if good else 'FAILED ' + detail}")
        ok = ok and s == 200 and good
    return 0 if ok else 1


# --------------------------------------------------------------------------------------------------
# condition 3: shared lockout counters


def admin(base, token, method, path, body):
    s, t = request(base, method, path, json.dumps(body), {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    if s not in (200, 201):
        raise SystemExit(f"admin {method} {path}: {s} {t[:200]}")
    return as_json(t)


def cmd_lockout(args):
    nodes = args.nodes.split(",")
    n = args.max_attempts
    app = admin(nodes[0], args.operator_token, "POST", "/admin/v1/apps", {"name": "Lockout", "signupFlow": "code"})
    admin(nodes[1 % len(nodes)], args.operator_token, "PATCH", f"/admin/v1/apps/{app['appId']}", {"maxLoginAttempts": n})
    token = app["appToken"]
    ref = app_ref(app["appId"])
    failures = []
    step = [0]

    def attempt(handle, pw, addr):
        node = nodes[step[0] % len(nodes)]
        step[0] += 1
        s, t = request(node, "POST", "/api/appuser/login", {"handle": handle, "password": pw},
                       {"app-token": token, "X-Forwarded-For": addr}, args.timeout)
        j = as_json(t) or {}
        if s == 200 and isinstance(j.get("access-token"), str):
            return "ok", node
        if s == 400 and j.get("code") == 600:
            return "600", node
        return f"{s} {t[:80]}", node

    def expect(label, got, want):
        if got != want:
            failures.append(f"{label}: expected {want}, got {got}")

    def audit(handle):
        rows = psql(f"SELECT status, COALESCE(detail->>'reason', '') FROM audit_log WHERE app_ref = {ref} AND action = 'login' "
                    f"AND detail->>'handle' = {sql_text(handle)} ORDER BY id")
        return [r[1] if r[0] == "error" else "success" for r in rows]

    def throttle(subject):
        rows = psql(f"SELECT failures, locked_until > now() FROM login_throttle WHERE app_ref = {ref} AND subject = {sql_text(subject)}")
        return (int(rows[0][0]), rows[0][1] == "t") if rows else (0, False)

    # --- A. per (handle, address): threshold N, counted on all nodes together ----------------------
    h1, pw1 = "lock-one@example.com", "Secret-1"
    admin(nodes[0], args.operator_token, "POST", f"/admin/v1/apps/{app['appId']}/users", {"handle": h1, "password": pw1})
    right, wrong = md5hex(pw1), md5hex("not-the-password")
    A, B = "203.0.113.10", "203.0.113.20"
    # A1: N-1 wrong passwords from A round-robin over the nodes; attempt N (right password) is still checked
    for i in range(n - 1):
        expect(f"A1 wrong #{i + 1}", attempt(h1, wrong, A)[0], "600")
    got, node = attempt(h1, right, A)
    expect(f"A1 attempt {n} (right password, {node}) after {n - 1} failures", got, "ok")
    # A2: the success forgot the count; N wrong passwords from A over the nodes, then attempt N+1 with the
    # right password is refused as locked on every node
    for i in range(n):
        expect(f"A2 wrong #{i + 1}", attempt(h1, wrong, A)[0], "600")
    fails, locked = throttle(f"login:{h1}|{A}")
    expect("A2 login_throttle (failures, locked) for (handle, A)", (fails, locked), (n, True))
    for k in range(len(nodes)):
        got, node = attempt(h1, right, A)
        expect(f"A2 attempt {n + 1 + k} (right password) from A on {node}", got, "600")
    # the lock is only A's: the owner logs in from B on any node
    got, node = attempt(h1, right, B)
    expect(f"A3 right password from another address B ({node})", got, "ok")
    a_audit = audit(h1)
    want = ["wrong password"] * (n - 1) + ["success"] + ["wrong password"] * n + ["locked"] * len(nodes) + ["success"]
    expect("A audit trail (password checked vs refused as locked)", a_audit, want)
    print(f"  (handle, address) lock, maxLoginAttempts N={n}, attempts round-robin over {len(nodes)} nodes directly, "
          f"X-Forwarded-For {A}:")
    print(f"    {n - 1} wrong then right password (attempt {n}) -> accepted: attempt N is still checked")
    print(f"    {n} wrong -> login_throttle failures={fails} locked={locked}; attempt N+1 with the right password on each node -> "
          f"{'refused (600, audit reason locked)' if not failures else 'see failures'}; from {B} -> accepted")

    # --- B. handle-wide: 3N failures from several addresses lock the handle on every node -----------
    factor = args.handle_factor
    h2, pw2 = "lock-many@example.com", "Secret-2"
    admin(nodes[0], args.operator_token, "POST", f"/admin/v1/apps/{app['appId']}/users", {"handle": h2, "password": pw2})
    right2 = md5hex(pw2)
    addrs = [f"198.51.100.{i + 1}" for i in range(factor)]
    fresh = "198.51.100.200"
    total = n * factor
    # (factor x N) - 1 wrong passwords: each address N (its own lock at N), the last one N-1
    count = 0
    for ai, addr in enumerate(addrs):
        for i in range(n if ai < factor - 1 else n - 1):
            count += 1
            expect(f"B wrong #{count} from {addr}", attempt(h2, wrong, addr)[0], "600")
    got, node = attempt(h2, right2, fresh)
    expect(f"B attempt {total} (right password from a fresh address, {node}) after {total - 1} failures", got, "ok")
    # that success gave its reservation back: one more failure reaches {total} and locks the handle
    expect(f"B wrong #{total} from {addrs[-1]}", attempt(h2, wrong, addrs[-1])[0], "600")
    hfails, hlocked = throttle(f"handle:{h2}")
    expect("B login_throttle (failures, locked) for the handle", (hfails, hlocked), (total, True))
    for k in range(len(nodes)):
        got, node = attempt(h2, right2, fresh)
        expect(f"B right password from a fresh address on {node} after {total} failures", got, "600")
    b_audit = audit(h2)
    want = ["wrong password"] * (total - 1) + ["success", "wrong password"] + ["locked"] * len(nodes)
    expect("B audit trail", b_audit, want)
    print(f"  handle-wide lock ({factor}xN = {total}) from {factor} addresses: {total - 1} failures then the right password "
          f"from a fresh address -> accepted; 1 more failure -> handle failures={hfails} locked={hlocked}; "
          f"the right password from the fresh address on each node -> {'refused (600)' if not failures else 'see failures'}")
    for f in failures:
        print(f"  FAILED {f}")
    return 0 if not failures else 1


# --------------------------------------------------------------------------------------------------
# conditions 1 and 2


def cmd_verify_signups(args):
    data = json.load(open(args.results))
    ref = app_ref(args.app_id)
    a = data["acks"]
    users = {}
    for h, c in psql(f"SELECT lower(handle), count(*) FROM users WHERE app_ref = {ref} GROUP BY 1"):
        users[h] = int(c)
    signups = {}
    for h, st, c in psql(f"SELECT lower(handle), status, count(*) FROM signups WHERE app_ref = {ref} GROUP BY 1, 2"):
        signups.setdefault(h, {})[st] = int(c)
    mails = {}
    for h, c in psql(f"SELECT lower(recipient), count(*) FROM messages WHERE app_ref = {ref} AND template = 'signUp' GROUP BY 1"):
        mails[h] = int(c)
    problems = []
    completed = set(a["completed"])
    for h in a["completed"]:
        if users.get(h, 0) != 1:
            problems.append(f"completed signup {h}: {users.get(h, 0)} users rows")
        if signups.get(h, {}).get("verified", 0) != 1:
            problems.append(f"completed signup {h}: signups rows {signups.get(h, {})}")
    for h in a["signup"]:
        live = signups.get(h, {})
        if live.get("pending", 0) + live.get("verified", 0) != 1:
            problems.append(f"acknowledged signup {h}: signups rows {live}")
        if mails.get(h, 0) < 1:
            problems.append(f"acknowledged signup {h}: no signUp e-mail in the outbox")
        if h in completed:
            continue
    dup_users = [h for h, c in users.items() if c > 1]
    dup_signups = [h for h, s in signups.items() if s.get("pending", 0) + s.get("verified", 0) > 1]
    if dup_users:
        problems.append(f"duplicated users: {dup_users[:5]}")
    if dup_signups:
        problems.append(f"duplicated signups: {dup_signups[:5]}")
    if len(completed) != len(a["completed"]):
        problems.append("a handle was acknowledged as completed twice")
    unack_present = sum(1 for h in a["signup_unacknowledged"] if h in signups)
    print(f"  acknowledged signups {len(a['signup'])}: each has exactly one signups row (pending or verified) and its "
          f"signUp e-mail in the outbox" + ("" if not problems else " -- NOT ALL"))
    print(f"  acknowledged completed signups {len(a['completed'])}: each exactly one users row; users in the app {len(users)}; "
          f"duplicated handles: users {len(dup_users)}, live signups {len(dup_signups)}")
    print(f"  unanswered signups {len(a['signup_unacknowledged'])}, of which committed anyway {unack_present} (allowed)")
    for p in problems[:20]:
        print(f"  FAILED {p}")
    return 0 if not problems else 1


def cmd_verify_mail(args):
    deadline = time.time() + args.wait
    last = None
    while True:
        rows = psql("SELECT status, count(*) FROM messages GROUP BY 1")
        counts = {s: int(c) for s, c in rows}
        pending = sum(c for s, c in counts.items() if s in ("queued", "sending"))
        if counts != last:
            last = counts
        if pending == 0 or time.time() > deadline:
            break
        time.sleep(0.5)
    waited = args.wait - max(0.0, deadline - time.time())
    ids = {r[0]: r[1:] for r in psql("SELECT id, status, attempts, recipient, COALESCE(last_error, '') FROM messages")}
    received = {}
    for to, subj, text, mid in read_mails(args.mails):
        if mid is not None:
            received[mid] = received.get(mid, 0) + 1
    problems = []
    not_sent = {k: v for k, v in ids.items() if v[0] != "sent"}
    missing = [k for k in ids if k not in received]
    twice = {k: c for k, c in received.items() if c > 1}
    unknown = [k for k in received if k not in ids]
    retried = sum(1 for v in ids.values() if int(v[1]) > 1)
    if not_sent:
        problems.append(f"{len(not_sent)} outbox rows not sent after {args.wait:g} s: " +
                        "; ".join(f"id {k} {v}" for k, v in list(not_sent.items())[:5]))
    if missing:
        problems.append(f"{len(missing)} outbox rows never received by the fake SendGrid: {missing[:10]}")
    print(f"  outbox rows {len(ids)} ({', '.join(f'{s} {c}' for s, c in sorted(last.items()))}); all sent after "
          f"{waited:.1f} s of waiting" if not not_sent else f"  outbox rows {len(ids)}: {last}")
    print(f"  fake SendGrid: {sum(received.values())} e-mails, {len(received)} distinct message ids; every outbox id received "
          f"{'yes' if not missing else 'NO'}; received more than once {len(twice)} (allowed after a crash: "
          f"no idempotency key){'; ids ' + str(sorted(twice, key=int)[:10]) if twice else ''}; rows with >1 attempt {retried}; "
          f"unknown ids {len(unknown)}")
    for p in problems:
        print(f"  FAILED {p}")
    return 0 if not problems else 1


# --------------------------------------------------------------------------------------------------


# The command line, shared with Tests/system/failover/load.py: the parsers of the subcommands both have.


def add_load_parser(sub, seconds, workers, prefix):
    lo = sub.add_parser("load")
    lo.add_argument("--base", required=True)
    lo.add_argument("--app-token", required=True)
    lo.add_argument("--seconds", type=float, default=seconds)
    lo.add_argument("--workers", type=int, default=workers)
    lo.add_argument("--timeout", type=float, default=10)
    lo.add_argument("--think", type=float, default=0.0)
    lo.add_argument("--error-pause", type=float, default=0.1)
    lo.add_argument("--mails", required=True)
    lo.add_argument("--out", required=True)
    lo.add_argument("--started", required=True)
    lo.add_argument("--prefix", default=prefix)
    lo.add_argument("--seed", type=int, default=1)
    return lo


def add_report_parser(sub, grace):
    rp = sub.add_parser("report")
    rp.add_argument("--results", required=True)
    rp.add_argument("--events", required=True)
    rp.add_argument("--grace", type=float, default=grace)
    rp.add_argument("--timeout", type=float, default=10)
    rp.add_argument("--show-errors", action="store_true")
    return rp


def add_check_parsers(sub):
    """serve and verify-signups."""
    sv = sub.add_parser("serve")
    sv.add_argument("--results", required=True)
    sv.add_argument("--nodes", required=True)
    sv.add_argument("--app-token", required=True)
    sv.add_argument("--timeout", type=float, default=10)
    vs = sub.add_parser("verify-signups")
    vs.add_argument("--results", required=True)
    vs.add_argument("--app-id", required=True)


def run_command(p, commands):
    """Parses the command line, runs commands[subcommand] and exits with its status (1 on an error)."""
    args = p.parse_args()
    try:
        status = commands[args.cmd](args) or 0
    except (OSError, http.client.HTTPException, subprocess.CalledProcessError, ValueError, KeyError) as e:
        print(f"  FAILED {args.cmd}: {type(e).__name__}: {e}")
        status = 1
    sys.exit(status)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    add_load_parser(sub, seconds=60, workers=6, prefix="mn")
    rp = add_report_parser(sub, grace=5)
    rp.add_argument("--victim", default="2")
    rp.add_argument("--nginx-log")
    rp.add_argument("--victim-port")
    add_check_parsers(sub)
    lk = sub.add_parser("lockout")
    lk.add_argument("--nodes", required=True)
    lk.add_argument("--operator-token", required=True)
    lk.add_argument("--max-attempts", type=int, default=6)
    lk.add_argument("--handle-factor", type=int, default=3)
    lk.add_argument("--timeout", type=float, default=10)
    vm = sub.add_parser("verify-mail")
    vm.add_argument("--mails", required=True)
    vm.add_argument("--wait", type=float, default=90)
    run_command(p, {"load": cmd_load, "report": cmd_report, "serve": cmd_serve, "lockout": cmd_lockout,
                    "verify-signups": cmd_verify_signups, "verify-mail": cmd_verify_mail})


if __name__ == "__main__":
    main()
