#!/usr/bin/env bash
# shellcheck disable=SC2119  # ops_get_application defaults to APP_TOKEN
# Tracing (and JSON logs). A throwaway PostgreSQL, a stand-in OTLP/HTTP collector (otlp_receiver.py) on
# a free port, and the server (.build/debug/cosyncauth or $BIN) with OTEL_EXPORTER_OTLP_ENDPOINT pointing
# at it (protocol http/json) and LOG_FORMAT=json. One end-user login; then, within 10 s, its trace must
# hold the request span (SERVER), `flow login` as its child, `SQL …` spans with db.system=postgresql and
# a `bcrypt verify` span (trace_check.py prints the span tree). The server log must be JSON lines with
# request ids, routes, statuses and app ids, and no secret (json_log_check.py).
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
START="$(date +%s.%N)"

ops_init trace
ops_start_pg trace
ops_server_env trace

SPANS="$TMP/otlp.jsonl"; : >"$SPANS"
"$PYTHON" "$OPS_DIR/otlp_receiver.py" "$SPANS" --port-file "$TMP/otlp.port" &
OPS_PIDS+=("$!")
for _ in $(seq 1 50); do [ -s "$TMP/otlp.port" ] && break; sleep 0.1; done
[ -s "$TMP/otlp.port" ] || { echo "the OTLP receiver did not start"; exit 1; }
OTLP_PORT="$(cat "$TMP/otlp.port")"
echo "OTLP receiver on 127.0.0.1:$OTLP_PORT"

LOG="$TMP/server.log"
ops_start_server "$LOG" OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$OTLP_PORT" OTEL_EXPORTER_OTLP_PROTOCOL=http/json \
  OTEL_BSP_SCHEDULE_DELAY=200 OTEL_SERVICE_NAME=cosyncauth LOG_FORMAT=json LOG_LEVEL=info COSYNC_ACCESS_LOG=all
echo "server on $BASE"

ops_create_app "Trace" >/dev/null
APP_SECRET="$(ops_json appSecret <<<"$APP_JSON")"
ops_create_user "trace@example.com" "Trace-pass-1"
REPLY="$(ops_get_application)"
[ "$(ops_status_of "$REPLY")" = 200 ] || { echo "getApplication failed: $REPLY"; exit 1; }
WRONG="$(ops_login trace@example.com Wrong-pass-9)"
REPLY="$(ops_login trace@example.com Trace-pass-1)"
[ "$(ops_status_of "$REPLY")" = 200 ] || { echo "login failed: $REPLY"; exit 1; }
echo "login: 200 (a wrong password before it: $(ops_status_of "$WRONG"))"

STATUS=0
echo "== spans"
"$PYTHON" "$OPS_DIR/trace_check.py" "$SPANS" --wait 10 || STATUS=1

ops_stop_server
echo "server stopped: code $SERVER_RC after $SERVER_STOP_SECONDS s"
echo "== JSON logs (LOG_FORMAT=json, $(grep -c . "$LOG") lines)"
{
  printf '%s\n' "Trace-pass-1" "$(ops_md5 Trace-pass-1)" "Wrong-pass-9" "$(ops_md5 Wrong-pass-9)"
  printf '%s\n' "$APP_TOKEN" "$APP_SECRET" "$COSYNC_OPERATOR_TOKEN" "$COSYNC_MASTER_KEY"
  ops_body_of "$REPLY" | ops_json access-token
  ops_body_of "$REPLY" | ops_json jwt
} >"$TMP/secrets.txt"
"$PYTHON" "$OPS_DIR/json_log_check.py" "$LOG" "$TMP/secrets.txt" --app-id "$APP_ID" || STATUS=1
if [ "$STATUS" -ne 0 ]; then echo "---- server log (last 15 lines) ----"; tail -15 "$LOG"; echo "----"; fi

echo "trace test: $([ "$STATUS" -eq 0 ] && echo PASS || echo FAIL) in $(ops_elapsed "$START") s"
exit "$STATUS"
