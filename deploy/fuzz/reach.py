"""Which admin operations the stateful phase of deploy/fuzz/admin.sh reached: reads schemathesis's VCR
cassette and the OpenAPI document, and prints, for each documented operation, how many of its stateful
calls got an answer other than 404 (a call with ids that exist). Exit 1 with --require when one got none.

    python3 deploy/fuzz/reach.py CASSETTE.yaml OPENAPI.json [--require]
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
    for phase, method, path, status in interactions(cassette):
        if phase != "stateful" or status is None:
            continue
        for label, op_method, regex, _ in operations:
            if op_method == method and regex.match(path):
                calls[label] += 1
                if status != 404:
                    reached[label] += 1
                break
    missing = []
    for label, *_ in sorted(operations, key=lambda op: op[0].split(" ", 1)[1] + op[0]):
        print(f"{reached[label]:5d} / {calls[label]:5d}  {label}")
        if reached[label] == 0:
            missing.append(label)
    print(f"stateful phase: {len(operations) - len(missing)} of {len(operations)} operations got a non-404 answer")
    for label in missing:
        print(f"  not reached: {label}")
    return 1 if missing and "--require" in sys.argv[3:] else 0


if __name__ == "__main__":
    sys.exit(main())
