#!/usr/bin/env python3
"""Checks the spans that otlp_receiver.py collected for one password login (Tests/system/ops/trace-test.sh).

    trace_check.py OUT.jsonl [--wait SECONDS] [--service cosyncauth]

Waits up to --wait seconds for the login trace to be complete, then checks, in one trace:
  - a request span of kind SERVER whose name mentions the login route (`/api/appuser/login`,
    `POST /api/appuser/login`, ...);
  - a span named `flow login` whose parent is that request span;
  - at least one span named `SQL …` with the attribute db.system = postgresql;
  - a span named `bcrypt verify`;
and prints the span tree of that trace (name, kind, parent, duration, a few attributes).
OTLP JSON ids may be hex (the OTLP spec) or base64 (protobuf JSON mapping); both are accepted.
Exit code 0 when every check passes, 1 otherwise.
"""
import argparse
import base64
import json
import re
import sys
import time

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def norm_id(value, nbytes):
    """Hex (lower case) of an OTLP JSON trace/span id, given as hex or base64; '' when empty."""
    if not value:
        return ""
    if re.fullmatch(r"[0-9a-fA-F]{%d}" % (nbytes * 2), value):
        return value.lower()
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=False)
        if len(raw) == nbytes:
            return raw.hex()
    except Exception:
        pass
    return "?" + value


def kind_name(k):
    if isinstance(k, int):
        return KINDS.get(k, str(k))
    if isinstance(k, str):
        return k.replace("SPAN_KIND_", "")
    return "UNSPECIFIED"


def any_value(v):
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "boolValue", "intValue", "doubleValue"):
        if key in v:
            return v[key]
    if "arrayValue" in v:
        return [any_value(x) for x in v["arrayValue"].get("values", [])]
    return v


def attrs(lst):
    return {a.get("key"): any_value(a.get("value")) for a in (lst or [])}


def get(d, *names, default=None):
    for n in names:
        if n in d:
            return d[n]
    return default


def load(path):
    spans, posts, non_json, resources = [], {}, [], []
    try:
        lines = open(path).read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        posts[rec["path"]] = posts.get(rec["path"], 0) + 1
        body = rec.get("json")
        if body is None:
            non_json.append(rec)
            continue
        for rs in get(body, "resourceSpans", "resource_spans", default=[]) or []:
            res = attrs(get(rs.get("resource") or {}, "attributes", default=[]))
            resources.append(res)
            for ss in get(rs, "scopeSpans", "scope_spans", "instrumentationLibrarySpans", default=[]) or []:
                for sp in ss.get("spans", []) or []:
                    start = int(get(sp, "startTimeUnixNano", "start_time_unix_nano", default=0) or 0)
                    end = int(get(sp, "endTimeUnixNano", "end_time_unix_nano", default=0) or 0)
                    spans.append({
                        "trace": norm_id(get(sp, "traceId", "trace_id", default=""), 16),
                        "span": norm_id(get(sp, "spanId", "span_id", default=""), 8),
                        "parent": norm_id(get(sp, "parentSpanId", "parent_span_id", default=""), 8),
                        "name": sp.get("name", ""),
                        "kind": kind_name(sp.get("kind")),
                        "start": start,
                        "ms": (end - start) / 1e6 if end and start else None,
                        "attrs": attrs(sp.get("attributes")),
                        "status": sp.get("status") or {},
                        "raw_ids": (get(sp, "traceId", "trace_id"), get(sp, "spanId", "span_id")),
                    })
    return spans, posts, non_json, resources


def is_login_request(sp):
    text = sp["name"] + " " + " ".join(str(v) for k, v in sp["attrs"].items() if "route" in k or "target" in k or "path" in k or "url" in k)
    return sp["kind"] == "SERVER" and "login" in text.lower()


def evaluate(spans):
    flows = [s for s in spans if s["name"] == "flow login"]
    result = {"flows": flows}
    if not flows:
        return result
    # the last successful login: its request span answered 200 (a wrong password makes a flow span too)
    def ok_login(f):
        return any(s["trace"] == f["trace"] and s["kind"] == "SERVER"
                   and str(s["attrs"].get("http.response.status_code", s["attrs"].get("http.status_code", ""))) == "200"
                   for s in spans)
    flow = max([f for f in flows if ok_login(f)] or flows, key=lambda f: f["start"])
    trace = [s for s in spans if s["trace"] == flow["trace"]]
    by_id = {s["span"]: s for s in trace}
    result.update(flow=flow, trace=trace, by_id=by_id)
    return result


def ancestors(span, by_id):
    out, seen = [], set()
    cur = span
    while cur["parent"] and cur["parent"] in by_id and cur["parent"] not in seen:
        seen.add(cur["parent"])
        cur = by_id[cur["parent"]]
        out.append(cur)
    return out


def print_tree(trace):
    by_id = {s["span"]: s for s in trace}
    children = {}
    roots = []
    for s in sorted(trace, key=lambda s: s["start"]):
        if s["parent"] and s["parent"] in by_id:
            children.setdefault(s["parent"], []).append(s)
        else:
            roots.append(s)

    def show(s, depth):
        extra = {k: v for k, v in s["attrs"].items() if k in ("db.system", "db.operation", "http.request.method", "http.method",
                                                             "http.route", "http.target", "url.path", "http.response.status_code",
                                                             "http.status_code")}
        parent = s["parent"] or "-"
        if s["parent"] and s["parent"] not in by_id:
            parent += " (not received)"
        ms = "" if s["ms"] is None else f"{s['ms']:.1f} ms"
        print(f"  {'  ' * depth}{s['name']}  [{s['kind']}]  span {s['span']}  parent {parent}  {ms}"
              + (f"  {json.dumps(extra)}" if extra else ""))
        for c in children.get(s["span"], []):
            show(c, depth + 1)

    for r in roots:
        show(r, 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--wait", type=float, default=10.0)
    ap.add_argument("--service", default="cosyncauth")
    args = ap.parse_args()

    deadline = time.time() + args.wait
    while True:
        spans, posts, non_json, resources = load(args.out)
        r = evaluate(spans)
        trace = r.get("trace") or []
        complete = (r.get("flow") is not None
                    and any(is_login_request(s) for s in trace)
                    and any(s["name"] == "bcrypt verify" for s in trace)
                    and any(s["name"].startswith("SQL ") for s in trace))
        if complete or time.time() >= deadline:
            break
        time.sleep(0.25)
    if complete:
        time.sleep(0.5)  # let the batch with the rest of the trace land
        spans, posts, non_json, resources = load(args.out)
        r = evaluate(spans)
        trace = r.get("trace") or []

    print(f"collector: POSTs by path {posts}; {len(spans)} spans in {len(set(s['trace'] for s in spans))} traces")
    if non_json:
        types = sorted(set(str(x.get("content_type")) for x in non_json))
        print(f"collector: {len(non_json)} POSTs whose body is not JSON (content types {types})")
    checks = []

    def check(name, ok, detail=""):
        checks.append((name, ok, detail))

    check("spans arrive as OTLP/HTTP JSON on /v1/traces", posts.get("/v1/traces", 0) > 0 and bool(spans),
          f"{posts.get('/v1/traces', 0)} POSTs" + (f", {len(non_json)} not JSON" if non_json else ""))
    services = sorted(set(str(res.get("service.name")) for res in resources))
    check(f"resource service.name = {args.service}", args.service in services, f"seen {services}")
    flow = r.get("flow")
    check("a span named 'flow login'", flow is not None, f"{len(r.get('flows', []))} found")
    if flow is None:
        names = sorted(set(s["name"] for s in spans))
        print("span names received:", names[:40])
    else:
        by_id = r["by_id"]
        requests = [s for s in trace if is_login_request(s)]
        check("a SERVER span for the login request in the same trace", bool(requests),
              ", ".join(f"'{s['name']}'" for s in requests) or
              "server spans: " + ", ".join(f"'{s['name']}'" for s in trace if s["kind"] == "SERVER"))
        parent = by_id.get(flow["parent"])
        direct = parent is not None and parent in requests
        via = [a["name"] for a in ancestors(flow, by_id)]
        check("the flow span's parent is the request span", direct,
              f"parent: {parent['name'] + ' [' + parent['kind'] + ']' if parent else (flow['parent'] or 'none')}; ancestors: {via}")
        sql = [s for s in trace if s["name"].startswith("SQL ")]
        sql_pg = [s for s in sql if s["attrs"].get("db.system") == "postgresql"]
        check("SQL spans with db.system = postgresql in the trace", bool(sql_pg),
              f"{len(sql_pg)} of {len(sql)} SQL spans: " + ", ".join(sorted(set(s["name"] for s in sql_pg)))[:200])
        flow_desc = [s for s in sql_pg if flow in ancestors(s, by_id)]
        print(f"info: {len(flow_desc)} of {len(sql_pg)} SQL spans are under the flow span")
        bcrypt = [s for s in trace if s["name"] == "bcrypt verify"]
        check("a 'bcrypt verify' span in the trace", bool(bcrypt),
              "" if not bcrypt else ("under the flow span" if flow in ancestors(bcrypt[0], by_id) else "not under the flow span"))
        ids_hex = all(re.fullmatch(r"[0-9a-fA-F]{32}", str(s["raw_ids"][0] or "")) for s in trace)
        if not ids_hex:
            print(f"NOTE: trace/span ids arrive base64-encoded (e.g. traceId {flow['raw_ids'][0]!r}), not hex as the OTLP JSON spec "
                  "requires; an OpenTelemetry Collector refuses such bodies (400). Accepted here; prefer http/protobuf in production.")
        print(f"login trace {flow['trace']} ({len(trace)} spans):")
        print_tree(trace)
    print("checks:")
    for name, ok, detail in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {name}" + (f": {detail}" if detail else ""))
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
