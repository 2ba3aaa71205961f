#!/usr/bin/env bash
# Read-route, login, token, fairness and many-apps benchmark against a release build on a throwaway
# local PostgreSQL. Every figure is printed next to its physical limit measured in the same run:
#   0. /healthz and getUser          next to  a bare Hummingbird 2 route pair served by the same binary
#                                             (`cosyncauth bench-bare`: a fixed JSON body; one primary-key
#                                             SELECT answered as JSON), same wrk settings
#   1. getApplication req/s          next to  /healthz req/s (same wrk -t2 -cC, same duration)
#   2. getUser req/s                 next to  one primary-key SELECT per query on the server's pool
#                                             settings (`cosyncauth bench-pk-select`, C tasks)
#   3. login req/s (bcrypt cost 10)  next to  the bcrypt ceiling (`cosyncauth bench-bcrypt`), with
#                                             login p50/p99 from wrk --latency
#   4. user-JWT issuance             next to  raw RSA-2048 PKCS#1 v1.5 SHA-256 signatures
#                                             (`cosyncauth bench-token`, one worker per core)
#   5. fairness: app A floods logins open loop at FLOOD x the bcrypt ceiling while app B sends
#      B_RATE logins/s (tools/bench/fairness.py): B's p50/p99 next to one bcrypt hash time, A's
#      503 rate and other outcomes
#   6. APPS apps (default 10000; APPS=0 skips): per-request cost of getApplication over every app's
#      token (round robin) and of getUser, next to the same with one app. Apps are seeded with
#      `cosyncauth bench-seed-apps` (one shared key pair); the admin API's creation rate is printed.
# Ends with a table: figure, value, limit, ratio, goal, met/MISS.
# Needs wrk and python3 (wrk is installed with apt-get when missing, as root).
#   BIN=.build/debug/cosyncauth (default: builds release)  DURATION=15 CONNECTIONS=16 USERS=32
#   APPS=10000 FAIR_SECONDS=60 FLOOD=3 B_RATE=5 tools/bench/login.sh   (B: 300 samples)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
# shellcheck source=../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"
DURATION="${DURATION:-15}"; CONNECTIONS="${CONNECTIONS:-16}"; USERS="${USERS:-32}"
APPS="${APPS:-10000}"; FAIR_SECONDS="${FAIR_SECONDS:-60}"; FLOOD="${FLOOD:-3}"; B_RATE="${B_RATE:-5}"
PK_CONCURRENCY="${PK_CONCURRENCY:-$CONNECTIONS}"; TOKEN_SECONDS="${TOKEN_SECONDS:-5}"

command -v wrk >/dev/null || { [ "$(id -u)" -eq 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed"; exit 1; }
. "$ROOT/tools/bench/release.sh"
bench_binary

pg_install_if_missing; pg_ensure_os_user
TMP="$(mktemp -d /tmp/cosync-bench.XXXXXX)"; chmod 755 "$TMP"; [ "$(id -u)" -eq 0 ] && chown "$PG_OS_USER": "$TMP"
SERVER_PID=""; BARE_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; [ -n "$BARE_PID" ] && kill "$BARE_PID" 2>/dev/null; pg_stop "$TMP/data" immediate || true; rm -rf "$TMP"; }
trap cleanup EXIT
PGPORT="$(pg_free_port 59432)"
pg_init "$TMP/data"; pg_start "$TMP/data" "$PGPORT" "$TMP"; pg_createdb "$PGPORT" bench
HTTP_PORT="$(pg_free_port 18580)"; H="http://127.0.0.1:$HTTP_PORT"
# The metrics have a listener of their own (never the public port).
METRICS_PORT="$(pg_free_port $((HTTP_PORT + 1)))"; M="http://127.0.0.1:$METRICS_PORT"
export DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/bench?sslmode=disable" PORT="$HTTP_PORT" COSYNC_METRICS_PORT="$METRICS_PORT"
export COSYNC_MASTER_KEY="$(head -c 32 /dev/urandom | base64)" COSYNC_OPERATOR_TOKEN="cop_bench_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export COSYNC_BCRYPT_COST=10 LOG_LEVEL=warning
# App creation takes its RSA key pair from the pool generated ahead (sql/0032); the burst below is
# measured once the pool holds it.
ADMIN_N="${ADMIN_N:-200}"; export COSYNC_KEY_POOL_SIZE="${KEY_POOL:-256}"

py() { python3 -c "$@"; }
calc() { py "print($1)"; }
rate() { sed -nE 's/^Requests\/sec: +([0-9.]+).*/\1/p'; }
non2xx() { n=$(sed -nE 's/.*Non-2xx or 3xx responses: ([0-9]+).*/\1/p' | head -1); echo "${n:-0}"; }
sockerr() { n=$(sed -nE 's/.*Socket errors: (.*)/\1/p' | head -1); echo "${n:-none}"; }
# wrk --latency percentile in ms: latency_ms 50 < wrk.txt
latency_ms() { py "
import re, sys
for line in sys.stdin:
    m = re.match(r'\s+$1%\s+([0-9.]+)(us|ms|s|m)\s*$', line)
    if m:
        print(float(m.group(1)) * {'us': 0.001, 'ms': 1, 's': 1000, 'm': 60000}[m.group(2)]); break
"; }
json_field() { py 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
admin() { curl -sf -X "$1" "$H$2" -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN" ${3:+-d "$3"}; }
# Result rows for the final table: name|value|limit|unit|op|goal (ratio = value/limit; op ge, le, lt or info).
ROWS="$TMP/rows"; : > "$ROWS"
row() { echo "$1|$2|$3|$4|$5|$6" >> "$ROWS"; }
# wrk with the token of each request taken round robin from a file (header $2, path $3): token_lua FILE HEADER PATH > script
token_lua() {
  cat <<LUA
local tokens = {}
for line in io.lines("$1") do if #line > 0 then tokens[#tokens + 1] = line end end
local n = 0
local started = 0
function setup(thread) started = started + 1; thread:set("offset", started * 7919) end
function init(args) n = (offset or 0) % #tokens end
request = function()
  n = n % #tokens + 1
  return wrk.format("GET", "$3", {["$2"] = tokens[n]})
end
LUA
}

echo "== ceilings before the server starts ($KIND)"
CEILING_LINE=$("$BIN" bench-bcrypt --seconds 10 --cost 10 --concurrency 8)
echo "$CEILING_LINE"
CEILING=$(echo "$CEILING_LINE" | sed -E 's/.* = ([0-9.]+) verifies\/s.*/\1/')
BCRYPT_THREADS=$(echo "$CEILING_LINE" | sed -E 's/.*pool threads: ([0-9]+).*/\1/')
ONE_HASH_MS=$(calc "round(1000.0 * $BCRYPT_THREADS / $CEILING, 2)")
echo "one bcrypt hash with every hashing thread busy: $ONE_HASH_MS ms ($BCRYPT_THREADS threads / ceiling)"
"$BIN" bench-token --seconds "$TOKEN_SECONDS" | tee "$TMP/token.txt"
RSA_CEILING=$(sed -nE 's/^raw RSA-2048 sign \(ceiling\): +([0-9.]+) .*/\1/p' "$TMP/token.txt")
TOKEN_RATE=$(sed -nE 's/^user JWT issuance \(RS256\): +([0-9.]+) .*/\1/p' "$TMP/token.txt")
TOKEN_WORKERS=$(sed -nE 's/.*\(([0-9]+) workers.*/\1/p' "$TMP/token.txt")

"$BIN" serve >"$TMP/server.log" 2>&1 & SERVER_PID=$!
for _ in $(seq 1 150); do curl -sf "$H/readyz" >/dev/null && break; sleep 0.1; done
curl -sf "$H/readyz" >/dev/null || { echo "server did not start:"; tail -20 "$TMP/server.log"; exit 1; }
# The key pool (sql/0032) fills in the background from start-up, one RSA-2048 key at a time on one thread
# (~0.15 s of a core each): every figure below waits until it is full, or it shares the CPU with key generation.
pool() { "$(pg_bin)/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -tAc "SELECT count(*) FROM app_key_pool" bench 2>/dev/null || echo 0; }
pool_full() {  # pool_full WHAT: waits (at most 180 s) until the pool holds COSYNC_KEY_POOL_SIZE keys
  local started; started=$(date +%s.%N)
  for _ in $(seq 1 720); do [ "$(pool)" -ge "$COSYNC_KEY_POOL_SIZE" ] && break; sleep 0.25; done
  echo "key pool: $(pool) of $COSYNC_KEY_POOL_SIZE keys ($1; waited $(calc "round($(date +%s.%N) - $started, 1)") s)"
}
pool_full "before the measurements"
APP=$(admin POST /admin/v1/apps '{"name":"Bench","signupFlow":"none","maxLoginAttempts":1000}')
TOKEN=$(echo "$APP" | py 'import json,sys; print(json.load(sys.stdin)["appToken"])')
MD5=$(printf 'bench-password' | md5sum | cut -d' ' -f1)
: > "$TMP/access-1app.txt"
for i in $(seq 1 "$USERS"); do
  curl -sf -X POST "$H/api/appuser/signup" -H "app-token: $TOKEN" --data-binary "handle=user$i@bench.test&password=$MD5" > "$TMP/signup$i.json"
  json_field "$TMP/signup$i.json" access-token >> "$TMP/access-1app.txt"
done
ACCESS=$(head -1 "$TMP/access-1app.txt")

echo "== one-primary-key-SELECT ceiling (server's pool settings, $PK_CONCURRENCY tasks, server idle)"
PK_LINE=$("$BIN" bench-pk-select --seconds "$DURATION" --concurrency "$PK_CONCURRENCY")
echo "$PK_LINE"
PK=$(echo "$PK_LINE" | sed -E 's/.* = ([0-9.]+) queries\/s.*/\1/')

echo "== /healthz (wrk -t2 -c$CONNECTIONS -d${DURATION}s)"
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" "$H/healthz" > "$TMP/healthz.txt"; cat "$TMP/healthz.txt"

echo "== the yardstick: bare Hummingbird routes in the same binary (cosyncauth bench-bare), the server idle"
BARE_PORT="$(pg_free_port $((HTTP_PORT + 7)))"; B="http://127.0.0.1:$BARE_PORT"
"$BIN" bench-bare --port "$BARE_PORT" >"$TMP/bare.log" 2>&1 & BARE_PID=$!
for _ in $(seq 1 100); do curl -sf "$B/healthz" >/dev/null && break; sleep 0.1; done
curl -sf "$B/healthz" >/dev/null || { echo "bench-bare did not start:"; tail -20 "$TMP/bare.log"; exit 1; }
"$(pg_bin)/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -tAc "SELECT id FROM users ORDER BY handle" bench | grep . > "$TMP/user-ids.txt"
cat > "$TMP/bare-user.lua" <<LUA
local ids = {}
for line in io.lines("$TMP/user-ids.txt") do if #line > 0 then ids[#ids + 1] = line end end
local n = 0
request = function()
  n = n % #ids + 1
  return wrk.format("GET", "/user/" .. ids[n])
end
LUA
curl -sf "$B/user/$(head -1 "$TMP/user-ids.txt")" >/dev/null || { echo "bench-bare /user/{id} failed"; exit 1; }
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" "$B/healthz" > "$TMP/bare-healthz.txt"; cat "$TMP/bare-healthz.txt"
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" -s "$TMP/bare-user.lua" "$B" > "$TMP/bare-user.txt"; cat "$TMP/bare-user.txt"
kill "$BARE_PID" 2>/dev/null; wait "$BARE_PID" 2>/dev/null || true; BARE_PID=""
BARE_HEALTHZ=$(rate < "$TMP/bare-healthz.txt"); BARE_USER=$(rate < "$TMP/bare-user.txt")
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
# PostgreSQL transactions (each pool checkout of a login is one transaction). A backend reports its
# counts when it has been idle for 10 s (PostgreSQL 15), so each reading waits 11 s first; the server's
# background pollers' own transactions are measured over an idle stretch of the same length and
# subtracted.
dbxacts() { sleep 11; dbxacts_now; }
dbxacts_now() { "$(pg_bin)/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -tAc "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = 'bench'" bench; }
echo "== one login, counted alone: pool checkouts (= transactions) and statements"
X0=$(dbxacts); T0=$(date +%s.%N)
for i in $(seq 1 100); do
  curl -sf -X POST "$H/api/appuser/login" -H "app-token: $TOKEN" --data-binary "handle=user$(( (i % USERS) + 1 ))@bench.test&password=$MD5" >/dev/null
done
T1=$(date +%s.%N); X1=$(dbxacts)
sleep "$(calc "round($T1 - $T0, 2)")"; X2=$(dbxacts)   # the same stretch, idle: the background's share
LOGIN_CHECKOUTS=$(calc "round((($X1 - $X0) - ($X2 - $X1)) / 100, 2)")
echo "db transactions per login (100 sequential logins, background subtracted: $X0 -> $X1 -> $X2): $LOGIN_CHECKOUTS" \
     "(target 2: the lookup with the attempt's reservation, then the session with its release)"
echo "== login (wrk -t2 -c$CONNECTIONS -d${DURATION}s --latency)"
LX0=$(dbxacts)
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$TMP/login.lua" "$H" > "$TMP/login.txt"; cat "$TMP/login.txt"
LOGIN_XACTS=$(calc "round(($(dbxacts) - $LX0) / max(1, $(sed -nE 's/^ *([0-9]+) requests in.*/\1/p' "$TMP/login.txt")), 2)")
LOGIN=$(rate < "$TMP/login.txt")
LOGIN_P50=$(latency_ms 50 < "$TMP/login.txt"); LOGIN_P99=$(latency_ms 99 < "$TMP/login.txt")
echo "== getApplication"
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" -H "app-token: $TOKEN" "$H/api/appuser/getApplication" > "$TMP/getapp.txt"; cat "$TMP/getapp.txt"
echo "== getUser (round robin over the $USERS users' access tokens, as the bare route goes over their ids)"
token_lua "$TMP/access-1app.txt" access-token /api/appuser/getUser > "$TMP/getuser-rr.lua"
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" -s "$TMP/getuser-rr.lua" "$H" > "$TMP/getuser.txt"; cat "$TMP/getuser.txt"
HEALTHZ=$(rate < "$TMP/healthz.txt"); GETAPP=$(rate < "$TMP/getapp.txt"); GETUSER=$(rate < "$TMP/getuser.txt")

echo "== fairness: app A at ${FLOOD}x the bcrypt ceiling, app B at $B_RATE logins/s, ${FAIR_SECONDS}s, open loop"
APPB=$(admin POST /admin/v1/apps '{"name":"Bench B","signupFlow":"none","maxLoginAttempts":1000}')
TOKEN_B=$(echo "$APPB" | py 'import json,sys; print(json.load(sys.stdin)["appToken"])')
for i in 1 2 3 4; do
  curl -sf -X POST "$H/api/appuser/signup" -H "app-token: $TOKEN_B" --data-binary "handle=buser$i@bench.test&password=$MD5" >/dev/null
done
A_RATE=$(calc "round($FLOOD * $CEILING, 1)")
python3 "$ROOT/tools/bench/fairness.py" --url "$H" --password "$MD5" --seconds "$FAIR_SECONDS" \
  --a-token "$TOKEN" --a-handles 'user{}@bench.test' --a-users "$USERS" --a-rate "$A_RATE" \
  --b-token "$TOKEN_B" --b-handles 'buser{}@bench.test' --b-users 4 --b-rate "$B_RATE" > "$TMP/fair.json"
python3 - "$TMP/fair.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for name in ("A", "B"):
    s = r[name]
    print(f"app {name} ({r[name.lower() + '_rate']}/s offered): sent {s['sent']}, outcomes {s['outcomes']}, "
          f"200s {s['ok_per_s']:.1f}/s, 503 rate {s['rate_503']:.3f} ({s['retry_after_on_503']} with Retry-After); "
          f"200 latency p50 {s['ok_p50_ms']} ms, p99 {s['ok_p99_ms']} ms, max {s['ok_max_ms']} ms; 503 p50 {s['refused_p50_ms']} ms; "
          f"client send lag p50 {s['client_lag_p50_ms']} ms, p99 {s['client_lag_p99_ms']} ms")
PY
echo "server KDF metrics after the run:"
curl -sf "$M/metrics" | grep -E '^cosync_kdf_(refused_total|wait_seconds_(count|sum))' | sed 's/^/  /' || echo "  (none exported)"
fair() { py 'import json,sys; r=json.load(open(sys.argv[1])); v=r[sys.argv[2]][sys.argv[3]]; print("nan" if v is None else v)' "$TMP/fair.json" "$1" "$2"; }
B_P50=$(fair B all_p50_ms); B_P99=$(fair B all_p99_ms); B_SENT=$(fair B sent); B_OUT=$(fair B outcomes)
A_503=$(calc "round($(fair A rate_503), 3)"); A_OUT=$(fair A outcomes); A_OK=$(fair A ok_per_s)

APPS_DONE=""
if [ "$APPS" -gt 0 ] 2>/dev/null; then
  echo "== $APPS apps: per-request cost with the app cache on (TTL: COSYNC_APP_CACHE_TTL, 120 s by default), against one app"
  # One app's token / one app's users, through the same round-robin wrk script as with many apps.
  echo "$TOKEN" > "$TMP/apptokens-1.txt"
  token_lua "$TMP/apptokens-1.txt" app-token /api/appuser/getApplication > "$TMP/getapp-1.lua"
  token_lua "$TMP/access-1app.txt" access-token /api/appuser/getUser > "$TMP/getuser-1.lua"
  # PostgreSQL transactions per request (each query outside a transaction is one): app-cache misses show here.
  xacts() { "$(pg_bin)/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -tAc "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = 'bench'" bench; }
  measured_wrk() {  # measured_wrk LUA OUT: wrk run, then transactions per request appended to OUT
    local before; before=$(xacts); sleep 1.5
    wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" -s "$1" "$H" > "$2"; sleep 1.5
    echo "XACTS_PER_REQ $(calc "round(($(xacts) - $before) / max(1, $(sed -nE 's/^ *([0-9]+) requests in.*/\1/p' "$2")), 3)")" >> "$2"
  }
  xpr() { sed -nE 's/^XACTS_PER_REQ (.*)/\1/p' "$1"; }
  measured_wrk "$TMP/getapp-1.lua" "$TMP/getapp-1.txt"
  measured_wrk "$TMP/getuser-1.lua" "$TMP/getuser-1.txt"
  GA1=$(rate < "$TMP/getapp-1.txt"); GU1=$(rate < "$TMP/getuser-1.txt")
  echo "one app: getApplication $GA1 req/s (non-2xx $(non2xx < "$TMP/getapp-1.txt"), $(xpr "$TMP/getapp-1.txt") db transactions/req)," \
       "getUser $GU1 req/s over $USERS users (non-2xx $(non2xx < "$TMP/getuser-1.txt"), $(xpr "$TMP/getuser-1.txt") db transactions/req)"
  # The admin API makes an RSA-2048 key per app: time a few to show what 10,000 would take.
  echo "key pool before the burst: $(pool) keys"
  ADMIN_START=$(date +%s.%N)
  seq 1 "$ADMIN_N" | xargs -P 4 -I{} curl -sf -o /dev/null -X POST "$H/admin/v1/apps" -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN" -d '{"name":"Admin {}"}'
  ADMIN_RATE=$(calc "round($ADMIN_N / ($(date +%s.%N) - $ADMIN_START), 1)")
  echo "admin API creation: $ADMIN_RATE apps/s ($ADMIN_N apps, 4 clients), key pool after: $(pool)"
  echo "admin API creation: $ADMIN_RATE apps/s (4 clients): $APPS apps would take $(calc "round($APPS / $ADMIN_RATE / 60, 1)") min; seeding with bench-seed-apps instead"
  pool_full "refilled after the burst, before the $APPS-apps figures"
  "$BIN" bench-seed-apps --count "$APPS" --out "$TMP/apptokens-many.txt"
  [ "$(grep -c . "$TMP/apptokens-many.txt")" -eq "$APPS" ] || { echo "seeding wrote the wrong number of tokens"; exit 1; }
  # getUser with many apps: 4 users in each of 8 seeded apps (the access token names the app).
  : > "$TMP/access-many.txt"
  for t in $(head -8 "$TMP/apptokens-many.txt"); do
    for i in 1 2 3 4; do
      curl -sf -X POST "$H/api/appuser/signup" -H "app-token: $t" --data-binary "handle=muser$i@bench.test&password=$MD5" > "$TMP/msignup.json"
      json_field "$TMP/msignup.json" access-token >> "$TMP/access-many.txt"
    done
  done
  token_lua "$TMP/apptokens-many.txt" app-token /api/appuser/getApplication > "$TMP/getapp-many.lua"
  token_lua "$TMP/access-many.txt" access-token /api/appuser/getUser > "$TMP/getuser-many.lua"
  # Warm-up: every app through the cache once (and its first load), then measure.
  wrk -t2 -c"$CONNECTIONS" -d5s -s "$TMP/getapp-many.lua" "$H" > "$TMP/getapp-warm.txt"
  echo "warm-up: $(rate < "$TMP/getapp-warm.txt") req/s over $APPS app tokens"
  measured_wrk "$TMP/getapp-many.lua" "$TMP/getapp-many.txt"
  measured_wrk "$TMP/getuser-many.lua" "$TMP/getuser-many.txt"
  GAN=$(rate < "$TMP/getapp-many.txt"); GUN=$(rate < "$TMP/getuser-many.txt")
  echo "$APPS apps: getApplication $GAN req/s round robin over all $APPS tokens (non-2xx $(non2xx < "$TMP/getapp-many.txt"), $(xpr "$TMP/getapp-many.txt") db transactions/req)," \
       "getUser $GUN req/s over 32 users in 8 of the apps (non-2xx $(non2xx < "$TMP/getuser-many.txt"), $(xpr "$TMP/getuser-many.txt") db transactions/req)"
  echo "(the app cache keeps an entry COSYNC_APP_CACHE_TTL seconds (120): an app asked less often than that is loaded again on its next request)"
  APPS_DONE=1
fi

echo
echo "== figures ($KIND; 2 cores shared by server, PostgreSQL and the load generators)"
printf 'bcrypt ceiling:  %8.1f verifies/s (cost 10, same pool)\n' "$CEILING"
printf 'login:           %8.1f req/s  = %.2f of the ceiling (non-2xx: %s; p50 %s ms, p99 %s ms)\n' "$LOGIN" "$(calc "$LOGIN/$CEILING")" "$(non2xx < "$TMP/login.txt")" "$LOGIN_P50" "$LOGIN_P99"
printf 'login db work:   %8s pool checkouts (= transactions) per login, background subtracted (target 2); %s per login under wrk, background included\n' "$LOGIN_CHECKOUTS" "$LOGIN_XACTS"
printf 'healthz:         %8.1f req/s (non-2xx: %s); bare Hummingbird %.1f req/s\n' "$HEALTHZ" "$(non2xx < "$TMP/healthz.txt")" "$BARE_HEALTHZ"
printf 'bare pk route:   %8.1f req/s (non-2xx: %s)\n' "$BARE_USER" "$(non2xx < "$TMP/bare-user.txt")"
printf 'getApplication:  %8.1f req/s (non-2xx: %s)\n' "$GETAPP" "$(non2xx < "$TMP/getapp.txt")"
printf 'pk select:       %8.1f queries/s\n' "$PK"
printf 'getUser:         %8.1f req/s (non-2xx: %s)\n' "$GETUSER" "$(non2xx < "$TMP/getuser.txt")"
printf 'raw RSA sign:    %8.1f /s; user JWT issuance %.1f /s (%s workers)\n' "$RSA_CEILING" "$TOKEN_RATE" "$TOKEN_WORKERS"
echo "fairness:        app A offered ${A_RATE}/s: outcomes $A_OUT (200s ${A_OK}/s, 503 rate $A_503); app B: $B_SENT sent, outcomes $B_OUT"
for f in login getapp getuser healthz bare-healthz bare-user; do
  e=$(sockerr < "$TMP/$f.txt"); [ "$e" = none ] || echo "wrk socket errors ($f): $e"
done

row "/healthz vs bare Hummingbird /healthz" "$HEALTHZ" "$BARE_HEALTHZ" "req/s" ge 0.8
row "getUser vs bare Hummingbird pk-SELECT route" "$GETUSER" "$BARE_USER" "req/s" ge 0.8
row "getApplication req/s vs /healthz" "$GETAPP" "$HEALTHZ" "req/s" ge 0.5
row "getUser req/s vs pk SELECT/s" "$GETUSER" "$PK" "/s" ge 0.8
row "login req/s vs bcrypt ceiling" "$LOGIN" "$CEILING" "/s" ge 0.95
row "login p99 vs p50 (c=$CONNECTIONS)" "$LOGIN_P99" "$LOGIN_P50" "ms" le 1.5
row "user JWT/s vs raw RSA sign/s" "$TOKEN_RATE" "$RSA_CEILING" "/s" ge 0.65
row "fair: B p50 vs one hash" "$B_P50" "$ONE_HASH_MS" "ms" info ""
row "fair: B p99 vs one hash ($B_SENT req)" "$B_P99" "$ONE_HASH_MS" "ms" lt 3
row "fair: B logins answered 200 (of $B_SENT)" "$(fair B outcomes | py 'import ast,sys; print(ast.literal_eval(sys.stdin.read()).get("200", 0))')" "$B_SENT" "" info ""
row "fair: A 503 rate (offered ${A_RATE}/s)" "$A_503" "1" "" info ""
if [ -n "$APPS_DONE" ]; then
  row "getApplication cost, $APPS apps vs 1" "$(calc "1e6 / $GAN")" "$(calc "1e6 / $GA1")" "us/req" le 1.1
  row "getUser cost, $APPS apps vs 1 (*)" "$(calc "1e6 / $GUN")" "$(calc "1e6 / $GU1")" "us/req" le 1.1
  row "app creation, admin API (goal 100/s)" "$ADMIN_RATE" "100" "/s" ge 1
fi
echo
echo "== summary"
python3 "$ROOT/tools/bench/goal_table.py" "$ROWS"
# tools/bench/goals.sh gathers the rows of every issue-24 benchmark into one table.
[ -z "${BENCH_ROWS:-}" ] || cat "$ROWS" >> "$BENCH_ROWS"
[ -z "$APPS_DONE" ] || echo "(*) getUser with $APPS apps: 32 users in 8 of the apps, with all $APPS apps in the database and the cache warmed over all of them; the one-app figure uses $USERS users of one app."
echo "ratios: value / limit; for the $APPS-apps rows the cost is 1 / req/s. Figures from a shared 2-core machine are noisy."
