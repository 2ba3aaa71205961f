#!/usr/bin/env python3
"""Load driver and report of Tests/system/failover/run.sh (Python 3 standard library only).

The end-user load is the multi-node test's (Tests/system/multinode/load.py: its Worker, checks and
helpers are imported from there); this adds readers of the routes the nodes answer from their app cache
(getApplication with the app token, and the app's JWKS), and a report about the database switches.

Subcommands:
  load            the multi-node workers plus the readers, through nginx, for N seconds
  report          per switch (events file of run.sh): errors, longest gaps, time to the first write
  verify-signups  (multinode) every acknowledged signup in the database exactly once
  serve           (multinode) every node answers /readyz 200 and a correct login
"""
import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "multinode"))
import load as mn  # noqa: E402  (Tests/system/multinode/load.py)

# requests that write to PostgreSQL (a signup, its completion, a login's audit and counters)
WRITES = ("signup", "completeSignup", "login", "loginWrong")
# the writes that are certainly transactions of their own (a login's audit row may be written later)
SIGNUPS = ("signup", "completeSignup")
# requests a node answers from memory (its app cache and signing keys)
CACHED = ("getApplication", "jwks")


class Reader(threading.Thread):
    """A closed loop of getApplication and JWKS requests (alternating)."""

    def __init__(self, rid, args, deadline, records):
        super().__init__(daemon=True)
        self.rid, self.args, self.deadline, self.records = rid, args, deadline, records

    def call(self, op, path, headers, expect):
        mn.timed_call(self.args, self.records, op, "GET", path, None, headers, lambda s, t: True if expect(s, t) else None)

    def run(self):
        app_id = self.args.app_id

        def app_ok(s, t):
            j = mn.as_json(t)
            return s == 200 and isinstance(j, dict) and j.get("name") == "Failover"

        def jwks_ok(s, t):
            j = mn.as_json(t)
            return s == 200 and isinstance(j, dict) and isinstance(j.get("keys"), list) and len(j["keys"]) > 0

        n = self.rid
        while time.time() < self.deadline:
            n += 1
            if n % 2:
                self.call("getApplication", "/api/appuser/getApplication", {"app-token": self.args.app_token}, app_ok)
            else:
                self.call("jwks", f"/apps/{app_id}/.well-known/jwks.json", {}, jwks_ok)
            time.sleep(self.args.reader_pause)


def cmd_load(args):
    data = mn.run_load(args, lambda deadline, records: [Reader(i, args, deadline, records) for i in range(args.readers)])
    data["readers"] = args.readers
    with open(args.out, "w") as f:
        json.dump(data, f)
    print(f"load: {data['t1'] - data['t0']:.1f} s, {args.workers} workers + {args.readers} readers, "
          f"{len(data['records'])} requests through {args.base}")


def longest_gap(ends, start, end):
    """The longest interval in [start, end] without an end time from `ends` (sorted)."""
    points = [start] + [e for e in ends if start <= e <= end] + [end]
    gap, at = 0.0, start
    for a, b in zip(points, points[1:]):
        if b - a > gap:
            gap, at = b - a, a
    return gap, at


def cmd_report(args):
    data = json.load(open(args.results))
    ev = mn.read_events(args.events)
    recs = data["records"]
    t0, t1 = data["t0"], data["t1"]
    rel = lambda t: f"+{t - t0:.1f}s"
    ok = [r for r in recs if r[3] == "ok"]
    errors = [r for r in recs if r[3] != "ok"]
    print(f"requests: {len(recs)} in {t1 - t0:.1f} s ({len(recs) / max(1e-9, t1 - t0):.0f}/s), {data['workers']} workers + "
          f"{data['readers']} readers through nginx; expected answers {len(ok)}; ERRORS {len(errors)} "
          f"({mn.fmt_kinds(mn.count_by(errors, lambda r: r[3]))})")
    mn.print_per_operation(recs)
    mn.print_error_answers(errors, 80)
    mn.print_acks(data["acks"])
    write_ok = sorted(r[1] for r in ok if r[2] in WRITES)
    cached_ok = sorted(r[1] for r in ok if r[2] in CACHED)
    # a switch's outage window: from the fault to the first successful write after the write path failed
    # (the database takes writes again), plus the grace; an error is "in flight" when its request was
    # open at some moment of a window.
    faults = [("failover (SIGKILL of the primary's postmaster)", "kill", ["promoted", "rejoined"]),
              ("switchover back (Patroni REST POST /switchover)", "switchover", ["switched", "switch_rejoined"])]
    windows = []
    print("definitions: an error is a request without the expected answer (transport error, timeout after "
          f"{args.timeout:g} s, HTTP 5xx or another unexpected answer). The outage window of a switch runs from the fault to "
          f"the first successful signup or completeSignup after the write path failed, plus {args.grace:g} s.")
    for name, key, marks in faults:
        if key not in ev:
            print(f"switch '{name}': did not happen")
            continue
        at = ev[key]
        # the first write answered after the write path failed (requests the dying primary's backends
        # still finished, committed on the synchronous standby, come before that and do not count);
        # without any failed write, the first write sent after the fault
        failed = [r for r in errors if r[2] in WRITES and r[1] >= at and r[0] <= at + 30]
        since = min((r[1] for r in failed), default=at)
        early = sum(1 for r in ok if r[2] in SIGNUPS and at <= r[0] and r[1] <= since)
        first = min((r for r in ok if r[2] in SIGNUPS and r[0] >= at and r[1] > since), key=lambda r: r[1], default=None)
        end = first[1] if first else t1
        windows.append((at, end + args.grace))
        marks_txt = ", ".join(f"{m} {rel(ev[m])} ({ev[m] - at:.1f} s)" for m in marks if m in ev)
        inside = [r for r in errors if r[0] <= end + args.grace and r[1] >= at]
        wgap, wgap_at = longest_gap(write_ok, at - 5, end + 5)
        cgap, cgap_at = longest_gap(cached_ok, at - 5, end + 5)
        per = mn.count_by(inside, lambda r: r[2])
        print(f"switch '{name}' at {rel(at)}: {marks_txt}")
        if first:
            print(f"  TIME TO FIRST SUCCESSFUL WRITE after the fault: {end - at:.2f} s ({first[2]} sent {rel(first[0])}, answered "
                  f"{rel(first[1])}; the first failed write was answered {rel(since)}; {early} signup(s) sent after the fault were "
                  "acknowledged before that)")
        else:
            print("  NO successful write after the fault")
        print(f"  errors in the window: {len(inside)} ({', '.join(f'{k} {v}' for k, v in sorted(per.items())) or 'none'})")
        print(f"  LONGEST GAP without a successful write: {wgap:.2f} s (from {rel(wgap_at)}); "
              f"without a cached read answered: {cgap:.2f} s (from {rel(cgap_at)})")
    gap_all, gap_all_at = longest_gap(write_ok, t0 + 2, t1)
    print(f"longest gap without a successful write over the whole run: {gap_all:.2f} s (from {rel(gap_all_at)})")
    in_window = lambda r: any(r[0] <= e and r[1] >= s for s, e in windows)
    outside = [r for r in errors if not in_window(r)]
    cached_err = [r for r in errors if r[2] in CACHED]
    timeouts = [r for r in errors if r[3] == "timeout"]
    print(f"errors outside the outage windows: {len(outside)}; errors on cached read routes: {len(cached_err)}; "
          f"requests that hung (no answer within {args.timeout:g} s): {len(timeouts)}")
    for r in (outside + cached_err)[:12]:
        print(f"  {r[2]} sent {rel(r[0])} answered {rel(r[1])}: {r[3]} {' '.join(r[4].split())[:100]}")
    if args.show_errors:
        for r in errors:
            print(f"  error {rel(r[0])}..{rel(r[1])} {r[2]}: {r[3]} {' '.join(r[4].split())[:100]}")
    # "keep answering": no error, and no stretch longer than --max-cached-gap without a cached read answered
    cached_gaps = [longest_gap(cached_ok, s, e)[0] for s, e in windows]
    slowest = max((r[1] - r[0] for r in recs if r[2] in CACHED), default=0.0)
    print(f"cached read routes: errors {len(cached_err)}, slowest answer {slowest:.2f} s, longest gap in a switch "
          f"{max(cached_gaps, default=0.0):.2f} s (limit {args.max_cached_gap:g} s)")
    cached_pass = "PASS" if not cached_err and cached_ok and max(cached_gaps, default=0.0) <= args.max_cached_gap else "FAIL"
    flight_pass = "PASS" if not outside and not timeouts and len(windows) == 2 and all(
        any(r[2] in SIGNUPS and r[0] >= ev[k] for r in ok) for k in ("kill", "switchover")) else "FAIL"
    if args.status:
        with open(args.status, "w") as f:
            f.write(f"{cached_pass}\n{flight_pass}\n")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    lo = mn.add_load_parser(sub, seconds=45, workers=5, prefix="fo")
    lo.add_argument("--app-id", required=True)
    lo.add_argument("--readers", type=int, default=2)
    lo.add_argument("--reader-pause", type=float, default=0.02)
    rp = mn.add_report_parser(sub, grace=1)
    rp.add_argument("--status")
    rp.add_argument("--max-cached-gap", type=float, default=1.0)
    mn.add_check_parsers(sub)
    mn.run_command(p, {"load": cmd_load, "report": cmd_report, "verify-signups": mn.cmd_verify_signups, "serve": mn.cmd_serve})


if __name__ == "__main__":
    main()
