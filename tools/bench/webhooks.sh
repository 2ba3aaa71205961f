#!/usr/bin/env bash
# Webhook benchmark on a throwaway local PostgreSQL, with Tests/system/webhooks/receiver.py (it verifies
# every request with `standardwebhooks`) as the receiver on 127.0.0.1:
#   - login req/s (bcrypt cost 10, wrk) with 2 endpoints subscribed to
#     user.login.succeeded (each login then writes one event and two deliveries in its request), in
#     windows that alternate with windows where the endpoints are disabled (no deliveries);
#   - events delivered per second: EVENTS events are queued for one endpoint and timed until the
#     workers (one node, 4 lanes) have delivered them all.
# Prints the figures. Not part of the test command. Needs wrk (apt-get install wrk) and a Python with
# standardwebhooks (.local/test-venv, made by Tests/test.sh).
#   BIN=.build/debug/cosyncauth (default: a release build)  DURATION=15 CONNECTIONS=16 EVENTS=3000
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
# shellcheck source=../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"
DURATION="${DURATION:-15}"; CONNECTIONS="${CONNECTIONS:-16}"; USERS="${USERS:-32}"; EVENTS="${EVENTS:-3000}"
PY="${COSYNC_TEST_VENV:-$ROOT/.local/test-venv}/bin/python"
"$PY" -c "import standardwebhooks" 2>/dev/null || { echo "no Python with standardwebhooks at $PY (run Tests/test.sh once)"; exit 1; }
command -v wrk >/dev/null || { [ "$(id -u)" -eq 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)"; exit 1; }
if [ -z "${BIN:-}" ]; then
  echo "building release..." >&2
  swift build -c release --product cosyncauth >&2
  BIN="$(swift build -c release --show-bin-path)/cosyncauth"
fi
KIND="$(case "$BIN" in *release*) echo release ;; *) echo "debug (BIN=$BIN)" ;; esac)"

pg_install_if_missing; pg_ensure_os_user
TMP="$(mktemp -d /tmp/cosync-bench-webhooks.XXXXXX)"; chmod 755 "$TMP"; [ "$(id -u)" -eq 0 ] && chown "$PG_OS_USER": "$TMP"
SERVER_PID=""; RCV_PID=""; NGX_PID=""
cleanup() {
  mkdir -p "$ROOT/tools/bench/out" && cp "$TMP/rcv/received.jsonl" "$ROOT/tools/bench/out/webhooks-received.jsonl" 2>/dev/null
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
  [ -n "$RCV_PID" ] && kill "$RCV_PID" 2>/dev/null
  [ -n "$NGX_PID" ] && kill "$NGX_PID" 2>/dev/null
  pg_stop "$TMP/data" immediate || true; rm -rf "$TMP"
}
trap cleanup EXIT
PGPORT="$(pg_free_port 59532)"
pg_init "$TMP/data"; pg_start "$TMP/data" "$PGPORT" "$TMP"; pg_createdb "$PGPORT" bench
psql_() { "$(pg_bin)/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -d bench -tAc "$1"; }
HTTP_PORT="$(pg_free_port 18680)"; H="http://127.0.0.1:$HTTP_PORT"
export DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/bench?sslmode=disable" PORT="$HTTP_PORT"
export COSYNC_MASTER_KEY="$(head -c 32 /dev/urandom | base64)" COSYNC_OPERATOR_TOKEN="cop_bench_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export COSYNC_BCRYPT_COST=10 LOG_LEVEL=warning COSYNC_METRICS_PORT=off  # no scrape here; no fixed port taken
export COSYNC_WEBHOOK_ALLOW_HTTP=1 COSYNC_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8 COSYNC_COURIER_POLL_MS=50

mkdir -p "$TMP/rcv"
"$PY" "$ROOT/Tests/system/webhooks/receiver.py" "$TMP/rcv" >/dev/null 2>&1 & RCV_PID=$!
for _ in $(seq 1 100); do [ -s "$TMP/rcv/port" ] && break; sleep 0.05; done
RCV="http://127.0.0.1:$(cat "$TMP/rcv/port")"

"$BIN" serve >"$TMP/server.log" 2>&1 & SERVER_PID=$!
for _ in $(seq 1 100); do curl -sf "$H/readyz" >/dev/null && break; sleep 0.1; done
admin() { curl -sf -X "$1" "$H$2" -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN" -H 'Content-Type: application/json' ${3:+--data-binary "$3"}; }
json() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
APP=$(admin POST /admin/v1/apps '{"name":"Bench","signupFlow":"none","maxLoginAttempts":1000}')
APP_ID=$(echo "$APP" | json appId); TOKEN=$(echo "$APP" | json appToken)
MD5=$(printf 'bench-password' | md5sum | cut -d' ' -f1)
for i in $(seq 1 "$USERS"); do
  curl -sf -X POST "$H/api/appuser/signup" -H "app-token: $TOKEN" --data-binary "handle=user$i@bench.test&password=$MD5" >/dev/null
done

cat > "$TMP/login.lua" <<LUA
local users = $USERS
local n = 0
request = function()
  n = n + 1
  local body = "handle=user" .. ((n % users) + 1) .. "@bench.test&password=$MD5"
  return wrk.format("POST", "/api/appuser/login", {["app-token"] = "$TOKEN"}, body)
end
LUA
rate() { sed -nE 's/^Requests\/sec: +([0-9.]+).*/\1/p'; }
non2xx() { sed -nE 's/.*Non-2xx or 3xx responses: ([0-9]+).*/\1/p' | head -1; }

SECRETS=()
# The receiver re-reads config.json on every request: replace it atomically.
set_secrets() {
  python3 -c 'import json,sys; json.dump({"secrets": sys.argv[2:]}, open(sys.argv[1], "w"))' "$TMP/rcv/config.tmp" "${SECRETS[@]}"
  mv "$TMP/rcv/config.tmp" "$TMP/rcv/config.json"
}
# The login measurement asks what webhooks cost the *server*: its 2 endpoints are an nginx answering 204
# (C, next to no CPU), so the Python receiver's signature checks do not take bcrypt's cores. Set
# LOGIN_RECEIVER=python to point them at receiver.py instead (the receiver's CPU is then counted too).
NGX_PORT="$(pg_free_port 18780)"
mkdir -p "$TMP/ngx"
cat > "$TMP/ngx/nginx.conf" <<NGX
daemon off; worker_processes 1; pid $TMP/ngx/nginx.pid; error_log $TMP/ngx/error.log;
events {}
http {
  access_log off; client_body_temp_path $TMP/ngx/b; proxy_temp_path $TMP/ngx/p; fastcgi_temp_path $TMP/ngx/f;
  uwsgi_temp_path $TMP/ngx/u; scgi_temp_path $TMP/ngx/s;
  server { listen 127.0.0.1:$NGX_PORT; location / { return 204; } }
}
NGX
LOGIN_RCV="$RCV"
if [ "${LOGIN_RECEIVER:-nginx}" = nginx ] && command -v nginx >/dev/null; then
  nginx -c "$TMP/ngx/nginx.conf" -p "$TMP/ngx" >/dev/null 2>&1 & NGX_PID=$!
  for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$NGX_PORT/" && break; sleep 0.1; done
  LOGIN_RCV="http://127.0.0.1:$NGX_PORT"
fi
echo "login-phase receiver: $LOGIN_RCV"
for path in a b; do
  HOOK=$(admin POST "/admin/v1/apps/$APP_ID/webhooks" "{\"url\":\"$LOGIN_RCV/$path\",\"eventTypes\":[\"user.login.succeeded\"]}")
  SECRETS+=("$(echo "$HOOK" | json secret)")
done
set_secrets
# The two login measurements alternate (ROUNDS times each, DURATION/ROUNDS seconds a window): the
# endpoints are disabled for one window and enabled for the next, so that whatever else the machine
# does weighs on both alike. A disabled endpoint gets no deliveries.
ROUNDS="${ROUNDS:-4}"; WINDOW=$(( DURATION / ROUNDS )); [ "$WINDOW" -ge 3 ] || WINDOW=3
HOOK_IDS=$(admin GET "/admin/v1/apps/$APP_ID/webhooks" | python3 -c 'import json,sys; print(" ".join(w["webhookId"] for w in json.load(sys.stdin)["webhooks"]))')
endpoints() { for id in $HOOK_IDS; do admin PATCH "/admin/v1/apps/$APP_ID/webhooks/$id" "{\"enabled\":$1}" >/dev/null; done; }
total0=0; total2=0; secs0=0; secs2=0
for round in $(seq 1 "$ROUNDS"); do
  endpoints false; sleep 1
  wrk -t2 -c"$CONNECTIONS" -d"${WINDOW}s" -s "$TMP/login.lua" "$H" > "$TMP/login0.txt"
  endpoints true; sleep 1
  wrk -t2 -c"$CONNECTIONS" -d"${WINDOW}s" -s "$TMP/login.lua" "$H" > "$TMP/login2.txt"
  r0=$(rate < "$TMP/login0.txt"); r2=$(rate < "$TMP/login2.txt")
  echo "round $round: no endpoint $r0 req/s, 2 endpoints $r2 req/s (non-2xx: $(non2xx < "$TMP/login0.txt")/$(non2xx < "$TMP/login2.txt"))"
  total0=$(python3 -c "print($total0 + $r0 * $WINDOW)"); total2=$(python3 -c "print($total2 + $r2 * $WINDOW)")
  secs0=$((secs0 + WINDOW)); secs2=$((secs2 + WINDOW))
done
L0=$(python3 -c "print($total0 / $secs0)"); L2=$(python3 -c "print($total2 / $secs2)")
# Let the login deliveries drain before the delivery measurement.
for _ in $(seq 1 600); do [ "$(psql_ "SELECT count(*) FROM webhook_deliveries WHERE status IN ('pending','sending')")" = 0 ] && break; sleep 0.5; done

echo "== delivery: $EVENTS events queued for one endpoint"
HOOK=$(admin POST "/admin/v1/apps/$APP_ID/webhooks" "{\"url\":\"$RCV/c\",\"eventTypes\":[\"user.updated\"]}")
SECRETS+=("$(echo "$HOOK" | json secret)"); HOOK_ID=$(echo "$HOOK" | json webhookId)
set_secrets
# The events are written as Events.record writes them (one event, one delivery), in one statement, and
# each has its own user so per-user ordering does not serialise them.
psql_ "WITH ev AS (
         INSERT INTO events (app_ref, type, user_id, body)
         SELECT a.id, 'user.updated', gen_random_uuid(),
                json_build_object('type', 'user.updated', 'timestamp', now(), 'data', json_build_object('appId', a.app_id, 'n', g))::text
         FROM apps a, generate_series(1, $EVENTS) g WHERE a.app_id = '$APP_ID' RETURNING id, user_id)
       INSERT INTO webhook_deliveries (endpoint_id, event_ref, user_id) SELECT '$HOOK_ID', id, user_id FROM ev" >/dev/null
START=$(date +%s.%N)
for _ in $(seq 1 1200); do
  LEFT=$(psql_ "SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = '$HOOK_ID' AND status <> 'delivered'")
  [ "$LEFT" = 0 ] && break; sleep 0.25
done
END=$(date +%s.%N)
DELIVERED=$(psql_ "SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = '$HOOK_ID' AND status = 'delivered'")
VERIFIED=$("$PY" -c 'import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; print(sum(1 for r in rows if any(r["verified"])), "of", len(rows), "; statuses", sorted({r["status"] for r in rows}))' "$TMP/rcv/received.jsonl")

echo
echo "== summary ($KIND build; 2 cores shared by server, PostgreSQL, receiver and wrk)"
printf 'login, no endpoint:        %8.1f req/s (%s s in %s windows)\n' "$L0" "$secs0" "$ROUNDS"
printf 'login, 2 endpoints:        %8.1f req/s (%s s in %s windows, alternating) = %.1f %% of the rate without\n' "$L2" "$secs2" "$ROUNDS" "$(python3 -c "print(100*$L2/$L0)")"
printf 'events delivered:          %8.1f /s (%s of %s in %.1f s, one node, 4 lanes)\n' \
  "$(python3 -c "print($DELIVERED/($END-$START))")" "$DELIVERED" "$EVENTS" "$(python3 -c "print($END-$START)")"
printf 'receiver requests verified with standardwebhooks: %s\n' "$VERIFIED"
