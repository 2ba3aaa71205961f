"""Which admin operations Tests/system/fuzz/admin.sh reached: reads schemathesis's VCR cassette and the OpenAPI
document, and prints, for each documented operation, how many of its calls reached a live object: a 2xx
answer, or a 409 (a conflict with the stored state of an object that was found). Any other answer
proves nothing (a 404 is an unknown id; a 400, 401 or 422 may come before any lookup). Counted in the
whole run and in its stateful phase. Exit 1 with --require when an operation was never reached.

    python3 Tests/system/fuzz/reach.py CASSETTE.yaml OPENAPI.json [--require] [--report-only] [--served PATH]

--report-only cancels --require (admin.sh passes it when FUZZ_PHASES runs only some phases).
--served PATH: the route that serves the document itself (schemathesis loads the document from it and
does not fuzz it); admin.sh passes it after fetching the document from the server with a 200.
"""
import json
import re
import sys
from collections import defaultdict
from urllib.parse import urlsplit


def interactions(path):
    """(phase, method, path, status) of each interaction; a line scan of the cassette schemathesis writes."""
    phase = method = uri = status = None
    with open(path, encoding="utf-8") as stream:
        for line in stream:
            if line.startswith("- id: "):
                if uri is not None:
                    yield phase, method, uri, status
                phase = method = uri = status = None
            elif line.startswith("    name: '") and phase is None:
                phase = line.split("'")[1]
            elif line.startswith("    uri: '"):
                uri = urlsplit(line[len("    uri: '"):].rstrip().rstrip("'")).path
            elif line.startswith("    method: '"):
                method = line.split("'")[1].upper()
            elif line.startswith("      code: '") and status is None:
                status = int(line.split("'")[1])
    if uri is not None:
        yield phase, method, uri, status


def live(status):
    return 200 <= status < 300 or status == 409


def main():
    cassette, document = sys.argv[1], sys.argv[2]
    with open(document, encoding="utf-8") as stream:
        paths = json.load(stream)["paths"]
    operations = []
    for template, item in paths.items():
        regex = re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$")
        for method in item:
            operations.append((f"{method.upper()} {template}", method.upper(), regex, template.count("{")))
    # The most specific template first (fewest parameters), so /apps/{appId}/users is not taken for /apps/{appId}.
    operations.sort(key=lambda op: op[3])
    reached, calls = defaultdict(int), defaultdict(int)
    stateful_reached, stateful_calls = defaultdict(int), defaultdict(int)
    for phase, method, path, status in interactions(cassette):
        if status is None:
            continue
        for label, op_method, regex, _ in operations:
            if op_method == method and regex.match(path):
                calls[label] += 1
                reached[label] += live(status)
                if phase == "stateful":
                    stateful_calls[label] += 1
                    stateful_reached[label] += live(status)
                break
    served = sys.argv[sys.argv.index("--served") + 1] if "--served" in sys.argv else None
    missing = []
    print("  all phases     stateful   (calls that reached a live object: 2xx or 409 / calls)")
    for label, *_ in sorted(operations, key=lambda op: op[0].split(" ", 1)[1] + op[0]):
        note = ""
        if label == f"GET {served}" and not calls[label]:
            note = "  (the document itself: loaded by schemathesis, fetched by admin.sh with 200)"
        elif reached[label] == 0:
            missing.append(label)
        print(f"{reached[label]:5d} / {calls[label]:5d}  {stateful_reached[label]:4d} / {stateful_calls[label]:4d}  {label}{note}")
    print(f"admin fuzz: {len(operations) - len(missing)} of {len(operations)} operations reached a live object (2xx or 409); "
          f"stateful phase alone: {sum(1 for label, *_ in operations if stateful_reached[label])}")
    for label in missing:
        print(f"  not reached: {label}")
    return 1 if missing and "--require" in sys.argv[3:] and "--report-only" not in sys.argv[3:] else 0


if __name__ == "__main__":
    sys.exit(main())
