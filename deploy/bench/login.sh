#!/usr/bin/env bash
# Login benchmark against a release build on a throwaway local PostgreSQL:
#   - the bcrypt ceiling (verifies/s on the server's hashing pool, cost 10), measured first;
#   - login req/s (POST /api/appuser/login, bcrypt cost 10) with wrk, both cores busy;
#   - getApplication and getUser req/s.
# Prints the figures and login / ceiling. Needs wrk (installed with apt-get when missing, as root).
#   DURATION=15 CONNECTIONS=16 deploy/bench/login.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
# shellcheck source=../lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"
DURATION="${DURATION:-15}"; CONNECTIONS="${CONNECTIONS:-16}"; USERS="${USERS:-32}"

command -v wrk >/dev/null || { [ "$(id -u)" -eq 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)"; exit 1; }
echo "building release..." >&2
swift build -c release --product cosyncauth >&2
BIN="$(swift build -c release --show-bin-path)/cosyncauth"

pg_install_if_missing; pg_ensure_os_user
TMP="$(mktemp -d /tmp/cosync-bench.XXXXXX)"; chmod 755 "$TMP"; [ "$(id -u)" -eq 0 ] && chown "$PG_OS_USER": "$TMP"
SERVER_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; pg_stop "$TMP/data" immediate || true; rm -rf "$TMP"; }
trap cleanup EXIT
PGPORT="$(pg_free_port 59432)"
pg_init "$TMP/data"; pg_start "$TMP/data" "$PGPORT" "$TMP"; pg_createdb "$PGPORT" bench
HTTP_PORT="$(pg_free_port 18580)"; H="http://127.0.0.1:$HTTP_PORT"
export DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/bench?sslmode=disable" PORT="$HTTP_PORT"
export COSYNC_MASTER_KEY="$(head -c 32 /dev/urandom | base64)" COSYNC_OPERATOR_TOKEN="cop_bench_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export COSYNC_BCRYPT_COST=10 LOG_LEVEL=warning

echo "== bcrypt ceiling (same pool, cost 10)"
CEILING_LINE=$("$BIN" bench-bcrypt --seconds 10 --cost 10 --concurrency 8)
echo "$CEILING_LINE"
CEILING=$(echo "$CEILING_LINE" | sed -E 's/.* = ([0-9.]+) verifies\/s.*/\1/')

"$BIN" serve >"$TMP/server.log" 2>&1 & SERVER_PID=$!
for _ in $(seq 1 100); do curl -sf "$H/readyz" >/dev/null && break; sleep 0.1; done
APP=$(curl -sf -X POST "$H/admin/v1/apps" -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN" -d '{"name":"Bench","signupFlow":"none","maxLoginAttempts":1000}')
TOKEN=$(echo "$APP" | python3 -c 'import json,sys; print(json.load(sys.stdin)["appToken"])')
MD5=$(printf 'bench-password' | md5sum | cut -d' ' -f1)
for i in $(seq 1 "$USERS"); do
  curl -sf -X POST "$H/api/appuser/signup" -H "app-token: $TOKEN" --data-binary "handle=user$i@bench.test&password=$MD5" > "$TMP/signup$i.json"
done
ACCESS=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["access-token"])' "$TMP/signup1.json")

cat > "$TMP/login.lua" <<LUA
local users = $USERS
local n = 0
request = function()
  n = n + 1
  local body = "handle=user" .. ((n % users) + 1) .. "@bench.test&password=$MD5"
  return wrk.format("POST", "/api/appuser/login", {["app-token"] = "$TOKEN"}, body)
end
response = function(status, headers, body)
  if status ~= 200 then wrk.thread:stop() end
end
LUA
rate() { sed -nE 's/^Requests\/sec: +([0-9.]+).*/\1/p'; }
non2xx() { sed -nE 's/.*Non-2xx or 3xx responses: ([0-9]+).*/\1/p'; }

echo "== login (wrk -t2 -c$CONNECTIONS -d${DURATION}s)"
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" -s "$TMP/login.lua" "$H" > "$TMP/login.txt"; cat "$TMP/login.txt"
LOGIN=$(rate < "$TMP/login.txt")
echo "== getApplication"
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" -H "app-token: $TOKEN" "$H/api/appuser/getApplication" > "$TMP/getapp.txt"; cat "$TMP/getapp.txt"
echo "== getUser"
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" -H "access-token: $ACCESS" "$H/api/appuser/getUser" > "$TMP/getuser.txt"; cat "$TMP/getuser.txt"

echo
echo "== summary (release build, 2 cores shared by server, PostgreSQL and wrk)"
printf 'bcrypt ceiling:  %8.1f verifies/s (cost 10, same pool)\n' "$CEILING"
printf 'login:           %8.1f req/s  = %.2f of the ceiling (non-2xx: %s)\n' "$LOGIN" "$(python3 -c "print($LOGIN/$CEILING)")" "$(non2xx < "$TMP/login.txt" | head -1)"
printf 'getApplication:  %8.1f req/s (non-2xx: %s)\n' "$(rate < "$TMP/getapp.txt")" "$(non2xx < "$TMP/getapp.txt" | head -1)"
printf 'getUser:         %8.1f req/s (non-2xx: %s)\n' "$(rate < "$TMP/getuser.txt")" "$(non2xx < "$TMP/getuser.txt" | head -1)"
