#!/usr/bin/env bash
# Fuzzes the admin API against its own OpenAPI document with schemathesis (PyPI):
#   Tests/system/fuzz/admin.sh BASE_URL OPERATOR_TOKEN
# Every check (`--checks all`), all phases (examples, coverage, fuzzing, stateful through the
# document's `links` and the links schemathesis infers), with schemathesis's default settings: no
# configuration file, no relaxation. hooks.py puts the ids of live objects (seed.py makes them
# through the admin and end-user APIs) into half of the generated path parameters, so that every
# operation also runs against objects that exist. Exits non-zero on any failure, and when an operation
# never reached a live object (reach.py: no 2xx or 409 answer). The server must already run
# (Tests/system/fuzz/run.sh starts one; seed.py's webhook receiver needs COSYNC_WEBHOOK_ALLOW_HTTP=1 and
# COSYNC_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8 on it). Settings:
#   FUZZ_MAX_EXAMPLES (default 20 per operation), FUZZ_SEED (default 1: reproducible runs; "random"
#   for a new seed), FUZZ_REPORT_DIR (JUnit and NDJSON reports; default: none), FUZZ_PHASES (a subset
#   of phases for quicker runs; then an operation not reached is reported, not a failure).
# Schemathesis comes from $COSYNC_TEST_VENV (Tests/test.sh's venv) when it has it, else from a venv
# made once under .local/fuzz-venv (git-ignored).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
if [ $# -ne 2 ] || [ -z "$1" ] || [ -z "$2" ]; then
  echo "usage: $0 BASE_URL OPERATOR_TOKEN" >&2
  exit 2
fi
BASE_URL="${1%/}"
TOKEN="$2"

if [ -n "${COSYNC_TEST_VENV:-}" ] && [ -x "$COSYNC_TEST_VENV/bin/schemathesis" ]; then
  VENV="$COSYNC_TEST_VENV"
else
  VENV="$ROOT/.local/fuzz-venv"
  if [ ! -x "$VENV/bin/schemathesis" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check schemathesis==4.32.5 hypothesis==6.170.15
  fi
fi

SEED_ARGS=()
if [ "${FUZZ_SEED:-1}" != "random" ]; then SEED_ARGS=(--seed "${FUZZ_SEED:-1}"); fi
# A VCR cassette always (Tests/system/fuzz/reach.py reads it: which operations the stateful phase reached).
REPORT_DIR="${FUZZ_REPORT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/cosyncauth-admin-fuzz.XXXXXX")}"
[ -n "${FUZZ_REPORT_DIR:-}" ] || trap 'rm -rf "$REPORT_DIR"' EXIT
mkdir -p "$REPORT_DIR"
REPORT_ARGS=(--report junit,ndjson,vcr --report-dir "$REPORT_DIR" --report-vcr-path "$REPORT_DIR/cassette.yaml")

# Schemathesis masks the Authorization header in its output. hooks.py (through seed.py) makes live
# objects with the operator token and puts their ids into path parameters.
set +e
PYTHONPATH="$ROOT/Tests/system/fuzz${PYTHONPATH:+:$PYTHONPATH}" SCHEMATHESIS_HOOKS=hooks \
COSYNC_FUZZ_BASE_URL="$BASE_URL" COSYNC_FUZZ_OPERATOR_TOKEN="$TOKEN" \
"$VENV/bin/schemathesis" --no-color run \
  "$BASE_URL/admin/v1/openapi.json" \
  --checks all \
  --phases "${FUZZ_PHASES:-examples,coverage,fuzzing,stateful}" \
  -H "Authorization: Bearer $TOKEN" \
  --max-examples "${FUZZ_MAX_EXAMPLES:-20}" \
  --workers 2 \
  --request-timeout 30 \
  --generation-database none \
  "${SEED_ARGS[@]}" "${REPORT_ARGS[@]}"
status=$?
set -e
# Every operation must have reached a live object (a 2xx or 409 answer; Tests/system/fuzz/reach.py). The
# document's own route is not fuzzed (schemathesis loads the document from it): fetched here.
reach=1
if "$VENV/bin/python" - "$BASE_URL/admin/v1/openapi.json" "$REPORT_DIR/openapi.json" <<'PY'
import sys, urllib.request
open(sys.argv[2], "wb").write(urllib.request.urlopen(sys.argv[1], timeout=10).read())
PY
then
  "$VENV/bin/python" "$ROOT/Tests/system/fuzz/reach.py" "$REPORT_DIR/cassette.yaml" "$REPORT_DIR/openapi.json" \
    --served /admin/v1/openapi.json ${FUZZ_PHASES:+--report-only} --require && reach=0
fi
if [ "$status" -ne 0 ]; then
  echo "admin API fuzzing: FAILED (schemathesis exit $status)" >&2
elif [ "$reach" -ne 0 ]; then
  echo "admin API fuzzing: FAILED (an operation never reached a live object; above)" >&2
  status=1
else
  echo "admin API fuzzing: no failures (schemathesis exit 0), every operation reached"
fi
exit "$status"
