#!/usr/bin/env bash
# Crash test of the outbox: a signup commits its e-mail to the outbox; the server is killed (SIGKILL)
# before the delivery worker sends it; after a restart the e-mail is delivered exactly once, and a
# second restart does not send it again. Uses a throwaway PostgreSQL and a fake SendGrid on 127.0.0.1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
# shellcheck source=../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"

swift build --product cosyncauth >/dev/null
BIN="$(swift build --show-bin-path)/cosyncauth"
pg_install_if_missing; pg_ensure_os_user
TMP="$(mktemp -d /tmp/cosync-crash.XXXXXX)"; chmod 755 "$TMP"
[ "$(id -u)" -eq 0 ] && chown "$PG_OS_USER": "$TMP"
SERVER_PID=""; FAKE_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null || true
  [ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null || true
  pg_stop "$TMP/data" immediate || true
  rm -rf "$TMP"
}
trap cleanup EXIT

PGPORT="$(pg_free_port 57432)"
pg_init "$TMP/data"; pg_start "$TMP/data" "$PGPORT" "$TMP" "-c fsync=off"; pg_createdb "$PGPORT" crash
FAKE_PORT="$(pg_free_port 58432)"; MAILS="$TMP/mails.jsonl"; touch "$MAILS"
python3 tools/bench/fake_sendgrid.py "$FAKE_PORT" "$MAILS" & FAKE_PID=$!
HTTP_PORT="$(pg_free_port 18480)"
export DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/crash?sslmode=disable" PORT="$HTTP_PORT"
export COSYNC_MASTER_KEY="$(head -c 32 /dev/urandom | base64)" COSYNC_OPERATOR_TOKEN="cop_crash_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export COSYNC_METRICS_PORT=off  # no scrape here; no fixed port taken
export COSYNC_EMAIL_TRANSPORT=sendgrid COSYNC_SENDGRID_API_KEY=SG.crash COSYNC_SENDGRID_BASE_URL="http://127.0.0.1:$FAKE_PORT"
H="http://127.0.0.1:$HTTP_PORT"
psql() { "$(pg_bin)/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -d crash -tAc "$1"; }

start_server() {  # $1 = courier poll interval in ms
  COSYNC_COURIER_POLL_MS="$1" "$BIN" serve >"$TMP/server.log" 2>&1 & SERVER_PID=$!
  for _ in $(seq 1 100); do curl -sf "$H/readyz" >/dev/null && return 0; sleep 0.1; done
  echo "server did not start"; cat "$TMP/server.log"; exit 1
}
count_mails() { grep -c "\"$1\"" "$MAILS" || true; }

# 1. A server whose worker looks at the outbox only once a minute: the e-mail waits in the outbox.
start_server 60000
APP=$(curl -sf -X POST "$H/admin/v1/apps" -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN" -d '{"name":"Crash","signupFlow":"code"}')
TOKEN=$(echo "$APP" | python3 -c 'import json,sys; print(json.load(sys.stdin)["appToken"])')
HANDLE="crash-$RANDOM@example.com"
MD5=$(printf 'pw' | md5sum | cut -d' ' -f1)
REPLY=$(curl -s -X POST "$H/api/appuser/signup" -H "app-token: $TOKEN" --data-binary "handle=$HANDLE&password=$MD5")
[ "$REPLY" = "true" ] || { echo "signup failed: $REPLY"; exit 1; }
echo "signup committed; outbox row: $(psql "select status||' attempts='||attempts from messages where recipient='$HANDLE'")"

# 2. Kill it before delivery.
kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
echo "server killed (SIGKILL); mails received so far: $(count_mails "$HANDLE")"

# 3. Restart: the worker finds the queued row and sends it.
start_server 100
for _ in $(seq 1 100); do [ "$(count_mails "$HANDLE")" -ge 1 ] && break; sleep 0.1; done
sleep 2
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
# 4. Another restart must not send it again.
start_server 100; sleep 2
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""

N=$(count_mails "$HANDLE")
ROW=$(psql "select status||' attempts='||attempts from messages where recipient='$HANDLE'")
echo "after restarts: mails received = $N; outbox row: $ROW"
if [ "$N" = "1" ] && [ "$ROW" = "sent attempts=1" ]; then
  echo "crash test: PASS (delivered exactly once)"
else
  echo "crash test: FAIL"; exit 1
fi
