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

BIN="${BIN:-$ROOT/.build/debug/cosyncauth}"
PYTHON="${PYTHON:-python3}"
OAUTH_DB="${OAUTH_DB:-cosyncauth_oauth}"
FILE_FILTER="${1:-}"
CASE_FILTER="${2:-}"
[ -x "$BIN" ] || { echo "oauth: no server binary at $BIN (run swift build first)" >&2; exit 2; }

if [ -n "${PGPORT:-}" ]; then
  admin_url="postgres://postgres@127.0.0.1:$PGPORT/postgres?sslmode=disable"
  OAUTH_DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/$OAUTH_DB?sslmode=disable"
elif [ -n "${DATABASE_URL:-}" ]; then
  base="${DATABASE_URL%%\?*}"
  query=""
  [ "$base" = "$DATABASE_URL" ] || query="?${DATABASE_URL#*\?}"
  admin_url="${base%/*}/postgres$query"
  OAUTH_DATABASE_URL="${base%/*}/$OAUTH_DB$query"
else
  echo "oauth: set PGPORT or DATABASE_URL" >&2
  exit 2
fi
PGOPTIONS="-c client_min_messages=warning" "$(pg_bin)/psql" "$admin_url" -qc "DROP DATABASE IF EXISTS \"$OAUTH_DB\"" -c "CREATE DATABASE \"$OAUTH_DB\"" >/dev/null

WORK="$(mktemp -d "${TMPDIR:-/tmp}/cosyncauth-oauth.XXXXXX")"
chmod 755 "$WORK"
LOG="$WORK/server.log"
SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap stop_server EXIT
print_log() { echo "---- server log (last 80 lines) ----" >&2; tail -80 "$LOG" >&2 || true; echo "----" >&2; }

HTTP_PORT="$(pg_free_port "${OAUTH_HTTP_PORT:-18580}")"
BASE="http://127.0.0.1:$HTTP_PORT"
OPERATOR_TOKEN="cop_oauth_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
MASTER_KEY="$(head -c 32 /dev/urandom | base64)"

DATABASE_URL="$OAUTH_DATABASE_URL" COSYNC_MASTER_KEY="$MASTER_KEY" COSYNC_OPERATOR_TOKEN="$OPERATOR_TOKEN" \
  PORT="$HTTP_PORT" HOST=127.0.0.1 COSYNC_PUBLIC_URL="$BASE" COSYNC_BCRYPT_COST=4 LOG_LEVEL="${OAUTH_LOG_LEVEL:-info}" \
  COSYNC_EMAIL_TRANSPORT=log COSYNC_SMS_TRANSPORT=log COSYNC_METRICS_PORT=off \
  "$BIN" serve >"$LOG" 2>&1 &
SERVER_PID=$!

ready=""
for _ in $(seq 300); do
  kill -0 "$SERVER_PID" 2>/dev/null || break
  if "$PYTHON" -c "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('$BASE/healthz', timeout=2).status == 200 else 1)" 2>/dev/null; then
    ready=1; break
  fi
  sleep 0.1
done
if [ -z "$ready" ]; then
  echo "oauth: the server did not come up on $BASE" >&2
  print_log
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
