#!/usr/bin/env bash
# A `perf` profile of the server under wrk load on one route, on a throwaway PostgreSQL:
#   ROUTE=healthz|getUser|getApplication|login|bare-healthz|bare-user tools/bench/profile.sh   (PERF=0: req/s only)
# Prints the requests/s, then the top of `perf report` (self time by symbol, and by shared object), so two
# builds can be compared line by line. Needs perf (Debian linux-perf) and wrk; BIN defaults to the release
# build in .build-release. DURATION (10 s) of load, perf records the middle of it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
# shellcheck source=../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"
ROUTE="${ROUTE:-healthz}"; DURATION="${DURATION:-10}"; CONNECTIONS="${CONNECTIONS:-16}"; TOP="${TOP:-40}"
command -v perf >/dev/null || { [ "$(id -u)" -eq 0 ] && apt-get install -y -qq linux-perf >/dev/null; }
command -v perf >/dev/null || { echo "perf is needed (apt-get install linux-perf)"; exit 1; }
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)"; exit 1; }
. "$ROOT/tools/bench/release.sh"
bench_binary
pg_install_if_missing; pg_ensure_os_user
TMP="$(mktemp -d /tmp/cosync-profile.XXXXXX)"; chmod 755 "$TMP"; [ "$(id -u)" -eq 0 ] && chown "$PG_OS_USER": "$TMP"
SERVER_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; pg_stop "$TMP/data" immediate || true; rm -rf "$TMP"; }
trap cleanup EXIT
[ -z "${KEEP_PERF:-}" ] || cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; pg_stop "$TMP/data" immediate || true; cp "$TMP/perf.data" "$KEEP_PERF" 2>/dev/null; rm -rf "$TMP"; }
PGPORT="$(pg_free_port 59632)"
pg_init "$TMP/data"; pg_start "$TMP/data" "$PGPORT" "$TMP"; pg_createdb "$PGPORT" prof
HTTP_PORT="$(pg_free_port 18780)"; H="http://127.0.0.1:$HTTP_PORT"
export DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/prof?sslmode=disable" PORT="$HTTP_PORT"
export COSYNC_MASTER_KEY="$(head -c 32 /dev/urandom | base64)" COSYNC_OPERATOR_TOKEN="cop_prof_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# No key pool here: its background key generation would be most of the profile.
export COSYNC_BCRYPT_COST=10 LOG_LEVEL=warning COSYNC_KEY_POOL_SIZE="${COSYNC_KEY_POOL_SIZE:-0}"
MD5=$(printf 'profile-password' | md5sum | cut -d' ' -f1)
case "$ROUTE" in
  bare-*)
    "$BIN" bench-bare --port "$HTTP_PORT" >"$TMP/server.log" 2>&1 & SERVER_PID=$!
    for _ in $(seq 1 100); do curl -sf "$H/healthz" >/dev/null && break; sleep 0.1; done
    "$BIN" migrate >/dev/null 2>&1 || true
    ;;
  *)
    "$BIN" serve >"$TMP/server.log" 2>&1 & SERVER_PID=$!
    for _ in $(seq 1 150); do curl -sf "$H/readyz" >/dev/null && break; sleep 0.1; done
    ;;
esac
curl -sf "$H/healthz" >/dev/null || { echo "the server did not start:"; tail -20 "$TMP/server.log"; exit 1; }
case "$ROUTE" in
  healthz|bare-healthz) wrk_args=("$H/healthz") ;;
  getApplication|getUser|login)
    TOKEN=$(curl -sf -X POST "$H/admin/v1/apps" -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN" -d '{"name":"Profile","signupFlow":"none","maxLoginAttempts":1000}' \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["appToken"])')
    ACCESS=$(curl -sf -X POST "$H/api/appuser/signup" -H "app-token: $TOKEN" --data-binary "handle=p1@bench.test&password=$MD5" \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["access-token"])')
    case "$ROUTE" in
      getApplication) wrk_args=(-H "app-token: $TOKEN" "$H/api/appuser/getApplication") ;;
      getUser) wrk_args=(-H "access-token: $ACCESS" "$H/api/appuser/getUser") ;;
      login)
        printf 'wrk.method = "POST"\nwrk.body = "handle=p1@bench.test&password=%s"\nwrk.headers["app-token"] = "%s"\n' "$MD5" "$TOKEN" > "$TMP/login.lua"
        wrk_args=(-s "$TMP/login.lua" "$H/api/appuser/login") ;;
    esac ;;
  bare-user)
    # bench-bare's /user/{id} reads the users table of its database: one row is enough.
    ID=$("$(pg_bin)/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -tAc "SELECT id FROM users LIMIT 1" prof)
    [ -n "$ID" ] || { echo "bare-user needs a user row: run it after a server made one (not supported alone)"; exit 1; }
    wrk_args=("$H/user/$ID") ;;
  *) echo "unknown ROUTE $ROUTE"; exit 2 ;;
esac
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" "${wrk_args[@]}" > "$TMP/wrk.txt" &
WRK=$!
if [ "${PERF:-1}" = 0 ]; then  # PERF=0: the requests/s alone, without perf's own cost
  wait "$WRK"
  echo "== $ROUTE: $(sed -nE 's/^Requests\/sec: +([0-9.]+).*/\1/p' "$TMP/wrk.txt") req/s (wrk -t2 -c$CONNECTIONS, ${DURATION} s, no perf)"
  exit 0
fi
sleep 2
perf record -F 999 -g -p "$SERVER_PID" -o "$TMP/perf.data" -- sleep "$((DURATION - 4))" 2>/dev/null >/dev/null
wait "$WRK"
echo "== $ROUTE: $(sed -nE 's/^Requests\/sec: +([0-9.]+).*/\1/p' "$TMP/wrk.txt") req/s (wrk -t2 -c$CONNECTIONS, perf recording the middle $((DURATION - 4)) s)"
echo "== by shared object (self)"
perf report -i "$TMP/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -12
echo "== by symbol (self), top $TOP"
perf report -i "$TMP/perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -"$TOP" | cut -c1-160
