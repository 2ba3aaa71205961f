#!/usr/bin/env bash
# PostgreSQL goes away under a running server: API requests answer 503 at once (no hanging),
# /healthz stays 200, /readyz says database_unavailable; PostgreSQL comes back on the same port and
# the server serves again without a restart; then PostgreSQL goes away again and a SIGTERM still ends
# the server with exit code 0 within the shutdown bound.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
START="$(date +%s.%N)"

ops_init dbdown
ops_start_pg dbdown
ops_server_env dbdown
# Requests bounded at 5 s here (default 15), so a request stuck on a dropped connection shows as a 503.
ops_start_server "$TMP/server.log" COSYNC_REQUEST_TIMEOUT_SECONDS=5
ops_create_app "DbDown" >/dev/null
ops_create_user "down@ops.test" "down-password"
LOGIN="$(ops_login "down@ops.test" "down-password")"
ACCESS_TOKEN="$(ops_json access-token <<<"$(ops_body_of "$LOGIN")")"
[ -n "$ACCESS_TOKEN" ] || { echo "login failed: $LOGIN"; exit 1; }
# The cluster runs with synchronous_commit=off (fast tests), so an immediate stop may lose the last
# commits; make the app durable first: the test is about the server, not about those settings.
ops_psql dbdown "CHECKPOINT" >/dev/null
REPLY="$(ops_get_application)"
[ "$(ops_status_of "$REPLY")" = 200 ] || { echo "getApplication failed: $REPLY"; exit 1; }

timed() {  # timed URL [curl args]: prints "STATUS SECONDS"
  local url="$1"; shift
  curl -s -o /dev/null -m 10 -w '%{http_code} %{time_total}' "$@" "$url" || true
}
fast_503() { set -- $1; [ "$1" = 503 ] && awk -v t="$2" 'BEGIN { exit !(t < 0.5) }'; }

pg_stop "$TMP/data" immediate
DOWN_AT="$(date +%s.%N)"
# A request sent at once: the monitor needs two failed probes (1-3 s) to declare the database down;
# a request waiting on the pool then is answered 503 as soon as it does. getApplication may also be
# answered 200 from the node's app cache, which keeps serving for 10 s after its listener's connection
# drops (README, "App cache"); either way it is not left hanging. getUser reads the user from the
# database: it must be the 503.
FIRST="$(timed "$BASE/api/appuser/getApplication" -H "app-token: $APP_TOKEN")"
echo "first request after PostgreSQL stopped: $FIRST s"
ops_check "a request caught by the failure is answered (200 from the app cache, or 503) within 4 s (not left hanging)" \
  awk -v r="$FIRST" 'BEGIN { split(r, a, " "); exit !((a[1] == 503 || a[1] == 200) && a[2] < 4) }'
if true; then
  USER_FIRST="$(timed "$BASE/api/appuser/getUser" -H "access-token: $ACCESS_TOKEN")"
  echo "first getUser after PostgreSQL stopped: $USER_FIRST s"
  ops_check "a getUser caught by the failure is answered 503 within 4 s" \
    awk -v r="$USER_FIRST" 'BEGIN { split(r, a, " "); exit !(a[1] == 503 && a[2] < 4) }'
fi
for _ in $(seq 1 60); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' -m 3 "$BASE/admin/v1/apps" -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN")" = 503 ] && break
  sleep 0.1
done
echo "database down noticed after $(ops_elapsed "$DOWN_AT") s"
API="$(timed "$BASE/api/appuser/getApplication" -H "app-token: $APP_TOKEN")"
ADMIN="$(timed "$BASE/admin/v1/apps" -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN")"
HEALTH="$(timed "$BASE/healthz")"
READY="$(curl -s -m 3 "$BASE/readyz")"
echo "while down: getApplication $API s; admin list $ADMIN s; healthz $HEALTH; readyz $READY"
ops_check "API requests answer 503 at once while PostgreSQL is down" fast_503 "$API"
ops_check "admin requests answer 503 at once while PostgreSQL is down" fast_503 "$ADMIN"
ops_check "liveness stays 200" [ "${HEALTH%% *}" = 200 ]
ops_check "readyz says database_unavailable" [ "$READY" = '{"status":"database_unavailable"}' ]

pg_start "$TMP/data" "$PGPORT" "$TMP" "-c fsync=off -c synchronous_commit=off"
UP_AT="$(date +%s.%N)"
# PostgresNIO reconnects with its own backoff (100 ms x 1.25^n), so the first seconds after a restart
# may still fail; every attempt must be answered within the request bound, and the node must serve
# again by itself.
OK=""; SLOWEST=0; TRIES=0
for _ in $(seq 1 300); do
  TRIES=$((TRIES + 1))
  R="$(timed "$BASE/api/appuser/getApplication" -H "app-token: $APP_TOKEN")"
  SLOWEST="$(awk -v a="$SLOWEST" -v r="$R" 'BEGIN { split(r, x, " "); print (x[2] > a ? x[2] : a) }')"
  if [ "${R%% *}" = 200 ]; then OK=yes; break; fi
  [ "$(ops_elapsed "$UP_AT" | cut -d. -f1)" -lt 30 ] || break
  sleep 0.1
done
echo "serving again $(ops_elapsed "$UP_AT") s after PostgreSQL restarted ($TRIES requests, slowest answer $SLOWEST s)"
ops_check "the server reconnects by itself and serves again (within 30 s)" [ -n "$OK" ]
ops_check "no request waited past the 5 s request bound while it reconnected" awk -v t="$SLOWEST" 'BEGIN { exit !(t < 6) }'

pg_stop "$TMP/data" immediate
sleep 3
ops_stop_server 40
echo "SIGTERM with PostgreSQL down: exit code $SERVER_RC after $SERVER_STOP_SECONDS s"
ops_check "SIGTERM while PostgreSQL is down exits 0" [ "$SERVER_RC" = 0 ]
ops_check "within the shutdown bound (drain 1 s + 20 s)" awk -v t="$SERVER_STOP_SECONDS" 'BEGIN { exit !(t < 21) }'

echo "dbdown test: $([ "$OPS_FAILED" -eq 0 ] && echo PASS || echo FAIL) in $(ops_elapsed "$START") s"
[ "$OPS_FAILED" -eq 0 ]
