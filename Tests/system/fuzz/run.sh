#!/usr/bin/env bash
# The fuzz step of Tests/test.sh: starts the already-built server (.build/debug/cosyncauth, or $BIN)
# on a free 127.0.0.1 port against a separate database, runs the end-user fuzzer (enduser.py) and, when
# it exists, the admin fuzzer (admin.sh BASE OPERATOR_TOKEN), and always stops the server.
#
# Needs a PostgreSQL server: PGPORT (default 5432) on 127.0.0.1, user postgres, trust auth (what
# Tests/test.sh starts), or DATABASE_URL whose database part is replaced by FUZZ_DB.
#   FUZZ_DB=cosyncauth_fuzz  FUZZ_REQUESTS=100000  FUZZ_SEED=<random>  PYTHON=python3  FUZZ_ADMIN=0 (skip admin.sh)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
# shellcheck source=../../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"

BIN="${BIN:-$ROOT/.build/debug/cosyncauth}"
PYTHON="${PYTHON:-python3}"
FUZZ_DB="${FUZZ_DB:-cosyncauth_fuzz}"
[ -x "$BIN" ] || { echo "fuzz: no server binary at $BIN (run swift build first)" >&2; exit 2; }

# A fresh database each run (the master key is new each run, and sealed rows of an old run would not open).
if [ -n "${PGPORT:-}" ]; then
  admin_url="postgres://postgres@127.0.0.1:$PGPORT/postgres?sslmode=disable"
  FUZZ_DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/$FUZZ_DB?sslmode=disable"
elif [ -n "${DATABASE_URL:-}" ]; then
  # the same server and credentials, another database
  base="${DATABASE_URL%%\?*}"
  query=""
  [ "$base" = "$DATABASE_URL" ] || query="?${DATABASE_URL#*\?}"
  admin_url="${base%/*}/postgres$query"
  FUZZ_DATABASE_URL="${base%/*}/$FUZZ_DB$query"
else
  echo "fuzz: set PGPORT or DATABASE_URL" >&2
  exit 2
fi

PGOPTIONS="-c client_min_messages=warning" "$(pg_bin)/psql" "$admin_url" -qc "DROP DATABASE IF EXISTS \"$FUZZ_DB\"" -c "CREATE DATABASE \"$FUZZ_DB\"" >/dev/null

WORK="$(mktemp -d "${TMPDIR:-/tmp}/cosyncauth-fuzz.XXXXXX")"
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
print_log() { echo "---- server log (last 80 lines of $LOG) ----" >&2; tail -80 "$LOG" >&2 || true; echo "----" >&2; }

HTTP_PORT="$(pg_free_port "${FUZZ_HTTP_PORT:-18480}")"
BASE="http://127.0.0.1:$HTTP_PORT"
OPERATOR_TOKEN="cop_fuzz_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
MASTER_KEY="$(head -c 32 /dev/urandom | base64)"

# The fuzzer is the proxy (127.0.0.1): its X-Forwarded-For values, hostile ones included, become
# client addresses and counter keys. Webhooks may go to http://127.0.0.1 (the admin fuzzer's receiver,
# Tests/system/fuzz/seed.py, so that messages are delivered and can be replayed).
DATABASE_URL="$FUZZ_DATABASE_URL" COSYNC_MASTER_KEY="$MASTER_KEY" COSYNC_OPERATOR_TOKEN="$OPERATOR_TOKEN" \
  PORT="$HTTP_PORT" HOST=127.0.0.1 COSYNC_BCRYPT_COST=4 LOG_LEVEL="${FUZZ_LOG_LEVEL:-warning}" \
  COSYNC_EMAIL_TRANSPORT=log COSYNC_SMS_TRANSPORT=log COSYNC_TRUSTED_PROXIES=127.0.0.1/32 COSYNC_METRICS_PORT=off \
  COSYNC_WEBHOOK_ALLOW_HTTP=1 COSYNC_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8 \
  "$BIN" serve >"$LOG" 2>&1 &
SERVER_PID=$!

ready=""
for _ in $(seq 300); do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then break; fi
  if "$PYTHON" -c "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('$BASE/healthz', timeout=2).status == 200 else 1)" 2>/dev/null; then
    ready=1; break
  fi
  sleep 0.1
done
if [ -z "$ready" ]; then
  echo "fuzz: the server did not come up on $BASE" >&2
  print_log
  exit 1
fi

status=0
"$PYTHON" "$ROOT/Tests/system/fuzz/enduser.py" --base "$BASE" --operator-token "$OPERATOR_TOKEN" \
  --requests "${FUZZ_REQUESTS:-100000}" ${FUZZ_SEED:+--seed "$FUZZ_SEED"} || status=$?

if [ "${FUZZ_ADMIN:-1}" = "1" ] && [ -f "$ROOT/Tests/system/fuzz/admin.sh" ]; then
  bash "$ROOT/Tests/system/fuzz/admin.sh" "$BASE" "$OPERATOR_TOKEN" || status=$?
fi

if ! kill -0 "$SERVER_PID" 2>/dev/null; then
  echo "fuzz: the server died during the run" >&2
  status=1
fi
[ "$status" -eq 0 ] || print_log
exit "$status"
