#!/usr/bin/env bash
# The OAuth/OIDC stage of Tests/test.sh (issue 22): independent Python clients, black-box, against the
# built server on a live port.
#
# Usage (the venv of Tests/test.sh has the packages: authlib, idpyoidc, jwcrypto, requests):
#   PGPORT=<port of a PostgreSQL, user postgres, trust auth> PYTHON=.local/test-venv/bin/python \
#     bash Tests/system/oauth/run.sh [test-file-filter [case-filter]]
#   e.g. ... run.sh basic_op code_reuse      (only test_basic_op.py, only cases whose name has "code_reuse")
# Or the whole stage with the rest of the suite mostly skipped:
#   COSYNC_SKIP_FUZZ=1 COSYNC_SKIP_OPS=1 bash Tests/test.sh --filter OpenAPI      (COSYNC_SKIP_OAUTH=1 skips it)
#
# What it does: starts the server (.build/debug/cosyncauth, or $BIN) on a free 127.0.0.1 port with
# COSYNC_PUBLIC_URL equal to that address, against its own fresh database (OAUTH_DB, default cosyncauth_oauth);
# setup.py makes an app (admin API, operator token), its OAuth clients (/admin/v1/apps/{appId}/oauth/clients)
# and users (end-user signup), and writes them to $OAUTH_WORLD (JSON); then each test_*.py here runs, then
# browser/run.sh (Apache mod_auth_openidc + Chromium) and dpop_client.py when they exist. Everything they
# need is in the environment: OAUTH_WORLD, OAUTH_BASE, OAUTH_ISSUER, OAUTH_APP_ID, OAUTH_APP_TOKEN,
# OAUTH_OPERATOR_TOKEN, OAUTH_DATABASE_URL, PYTHON. Exits non-zero when any of them fails; the server log's
# tail is printed then.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
HERE="$ROOT/Tests/system/oauth"
cd "$ROOT"
# shellcheck source=../../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"
# shellcheck source=../lib/server.sh
. "$ROOT/Tests/system/lib/server.sh"

BIN="${BIN:-$ROOT/.build/debug/cosyncauth}"
PYTHON="${PYTHON:-python3}"
OAUTH_DB="${OAUTH_DB:-cosyncauth_oauth}"
FILE_FILTER="${1:-}"
CASE_FILTER="${2:-}"
[ -x "$BIN" ] || { echo "oauth: no server binary at $BIN (run swift build first)" >&2; exit 2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/cosyncauth-oauth.XXXXXX")"
chmod 755 "$WORK"
LOG="$WORK/server.log"
trap 'server_cleanup; rm -rf "$WORK"' EXIT
# The database (in the caller's PostgreSQL, PGPORT or DATABASE_URL; else a throwaway cluster) and the server
# start-up are shared with the Portal stage: Tests/system/lib/server.sh.
server_database "$OAUTH_DB" "$WORK"
OAUTH_DATABASE_URL="$SERVER_DATABASE_URL"
print_log() { echo "---- server log (last 80 lines) ----" >&2; tail -80 "$LOG" >&2 || true; echo "----" >&2; }

HTTP_PORT="$(pg_free_port "${OAUTH_HTTP_PORT:-18580}")"
BASE="http://127.0.0.1:$HTTP_PORT"
OPERATOR_TOKEN="cop_oauth_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
MASTER_KEY="$(head -c 32 /dev/urandom | base64)"

# The upstream OpenID provider (test_upstream_idp.py) runs on 127.0.0.1: the operator allows outgoing calls
# there, as a deployment with a provider beside the server would (<doc:OAuth> "URLs the server fetches").
if ! server_start "$HTTP_PORT" "$LOG" COSYNC_MASTER_KEY="$MASTER_KEY" COSYNC_OPERATOR_TOKEN="$OPERATOR_TOKEN" \
  COSYNC_PUBLIC_URL="$BASE" LOG_LEVEL="${OAUTH_LOG_LEVEL:-info}" COSYNC_WEBHOOK_ALLOW_HTTP=1 COSYNC_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8; then
  echo "oauth: the server did not come up on $BASE" >&2
  exit 1
fi

export OAUTH_WORLD="$WORK/world.json" OAUTH_BASE="$BASE" OAUTH_OPERATOR_TOKEN="$OPERATOR_TOKEN" \
  OAUTH_DATABASE_URL PYTHON
if ! "$PYTHON" "$HERE/setup.py" --base "$BASE" --operator-token "$OPERATOR_TOKEN" --out "$OAUTH_WORLD"; then
  echo "oauth: setup failed (app, clients or users could not be made)" >&2
  print_log
  exit 1
fi
OAUTH_APP_ID="$("$PYTHON" -c "import json, sys; print(json.load(open(sys.argv[1]))['appId'])" "$OAUTH_WORLD")"
OAUTH_APP_TOKEN="$("$PYTHON" -c "import json, sys; print(json.load(open(sys.argv[1]))['appToken'])" "$OAUTH_WORLD")"
export OAUTH_APP_ID OAUTH_APP_TOKEN OAUTH_ISSUER="$BASE/apps/$OAUTH_APP_ID"

status=0
failed=()
step() {  # step NAME command...
  local name="$1"; shift
  echo "== oauth: $name" >&2
  local start=$SECONDS
  if "$@"; then
    echo "== oauth: $name passed ($((SECONDS - start)) s)" >&2
  else
    echo "== oauth: $name FAILED ($((SECONDS - start)) s)" >&2
    status=1
    failed+=("$name")
  fi
}
for test in "$HERE"/test_*.py; do
  name="$(basename "$test" .py)"
  case "$name" in *"$FILE_FILTER"*) ;; *) continue ;; esac
  step "$name" "$PYTHON" "$test" ${CASE_FILTER:+-k "$CASE_FILTER"}
done
if [ -z "$FILE_FILTER" ] || [ "$FILE_FILTER" = "browser" ]; then
  if [ -f "$HERE/browser/run.sh" ]; then step "browser/run.sh" bash "$HERE/browser/run.sh"; fi
fi
if [ -z "$FILE_FILTER" ] || [ "$FILE_FILTER" = "dpop" ]; then
  if [ -f "$HERE/dpop_client.py" ]; then step "dpop_client.py" "$PYTHON" "$HERE/dpop_client.py"; fi
fi

if ! kill -0 "$SERVER_PID" 2>/dev/null; then
  echo "oauth: the server died during the run" >&2
  status=1
  failed+=("server died")
fi
if [ "$status" -ne 0 ]; then
  print_log
  echo "oauth: FAILED: ${failed[*]}" >&2
fi
exit "$status"
