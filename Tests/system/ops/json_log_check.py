#!/usr/bin/env python3
"""Checks a server log written with LOG_FORMAT=json (Tests/system/ops/trace-test.sh).

    json_log_check.py SERVER.LOG SECRETS.txt --app-id APPID

Every non-empty line (stdout and stderr together) must be one JSON object with `level`, `message` and
`label`; request lines (`message` = "request") must carry `request_id`, `route` and `status`, and the
successful end-user login and getApplication lines the `app_id` of the app. No line may contain any of
the strings of SECRETS.txt (one a line: passwords, their MD5, tokens, secrets, the master key).
Exit code 0 when all hold.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("secrets")
    ap.add_argument("--app-id", required=True)
    args = ap.parse_args()
    lines = [l for l in open(args.log, encoding="utf-8", errors="replace").read().splitlines() if l.strip()]
    secrets = [s for s in open(args.secrets).read().splitlines() if len(s) >= 6]
    objects, not_json, missing = [], [], []
    for l in lines:
        try:
            o = json.loads(l)
        except ValueError:
            not_json.append(l)
            continue
        if not isinstance(o, dict):
            not_json.append(l)
            continue
        objects.append(o)
        if not all(k in o for k in ("level", "message", "label")):
            missing.append(l)
    requests = [o for o in objects if o.get("message") == "request"]
    req_missing = [o for o in requests if not all(k in o for k in ("request_id", "route", "status"))]
    def route_is(o, name):
        return str(o.get("route", "")).rstrip("/").endswith(name)
    login = [o for o in requests if route_is(o, "/api/appuser/login") and str(o.get("status")) == "200"]
    getapp = [o for o in requests if route_is(o, "/api/appuser/getApplication") and str(o.get("status")) == "200"]
    leaks = [(s[:6] + "…", l[:160]) for l in lines for s in secrets if s in l]
    checks = [
        ("every log line is one JSON object", bool(lines) and not not_json,
         f"{len(lines)} lines" + (f"; not JSON: {not_json[0][:160]!r}" if not_json else "")),
        ("every JSON line has level, message, label", not missing, f"missing in {len(missing)}" + (f": {missing[0][:160]}" if missing else "")),
        ("request lines carry request_id, route, status", bool(requests) and not req_missing,
         f"{len(requests)} request lines" + (f"; incomplete: {json.dumps(req_missing[0])[:200]}" if req_missing else "")),
        ("the login request line carries app_id", bool(login) and all(o.get("app_id") == args.app_id for o in login),
         (json.dumps(login[0], sort_keys=True)[:300] if login else "no 200 login request line")),
        ("the getApplication request line carries app_id", bool(getapp) and all(o.get("app_id") == args.app_id for o in getapp),
         f"{len(getapp)} lines"),
        ("no password, token, secret or key in the log", not leaks,
         f"{len(secrets)} secrets looked for" + (f"; found {leaks[0][0]} in {leaks[0][1]!r}" if leaks else "")),
    ]
    for name, ok, detail in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {name}" + (f": {detail}" if detail else ""))
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
