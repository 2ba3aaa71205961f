#!/usr/bin/env bash
# The metrics listener (hardening issue 20, item 9). A throwaway PostgreSQL and the built server
# (.build/debug/cosyncauth or $BIN). Passes when the public port answers 404 for /metrics, the metrics
# listener (COSYNC_METRICS_PORT, on 127.0.0.1 by default) serves them and nothing else,
# COSYNC_METRICS_PORT=off leaves no metrics listener, and a metrics port equal to PORT, or not a port,
# stops the server at start with exit code 2 and a line naming the setting.
#   OPS_KEEP_ON_FAILURE=1 keeps the temp folder (server log) on failure
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
START="$(date +%s.%N)"

ops_init metrics
ops_start_pg metrics
ops_server_env metrics
LOG="$TMP/server.log"
status() { curl -s -o /dev/null -w '%{http_code}' -m 5 "$@" || true; }

ops_start_server "$LOG"
echo "server pid $SERVER_PID on $BASE, metrics on $METRICS_BASE"
ops_check "public port: GET /metrics answers 404" [ "$(status "$BASE/metrics")" = 404 ]
ops_check "public port: POST /metrics answers 404" [ "$(status -X POST "$BASE/metrics")" = 404 ]
ops_check "public port: GET //metrics/ answers 404" [ "$(status "$BASE//metrics/")" = 404 ]
ops_check "metrics listener: GET /metrics answers 200" [ "$(status "$METRICS_BASE/metrics")" = 200 ]
BODY="$(curl -s -m 5 "$METRICS_BASE/metrics" || true)"
ops_check "the metrics show the public port's requests (hb_requests for /readyz)" grep -q 'hb_requests{.*http_route="/readyz"' <<<"$BODY"
ops_check "the metrics show the server's own metrics (cosync_db_up)" grep -q '^cosync_db_up' <<<"$BODY"
ops_check "metrics listener: GET /readyz answers 404" [ "$(status "$METRICS_BASE/readyz")" = 404 ]
ops_check "metrics listener: GET /admin/v1/openapi.json answers 404" [ "$(status "$METRICS_BASE/admin/v1/openapi.json")" = 404 ]
ops_check "the log names the metrics address (127.0.0.1 by default)" grep -q "127.0.0.1:$METRICS_PORT" "$LOG"
ops_stop_server 25
ops_check "SIGTERM with the metrics listener exits 0" [ "$SERVER_RC" = 0 ]

ops_start_server "$TMP/server-off.log" COSYNC_METRICS_PORT=off
ops_check "COSYNC_METRICS_PORT=off: the API serves" [ "$(status "$BASE/healthz")" = 200 ]
ops_check "COSYNC_METRICS_PORT=off: no metrics listener" [ "$(status "$METRICS_BASE/metrics")" = 000 ]
ops_check "COSYNC_METRICS_PORT=off: the public port still answers 404 for /metrics" [ "$(status "$BASE/metrics")" = 404 ]
ops_stop_server 25

refused() {  # refused SETTING [VAR=value...] COMMAND...: the command exits 2 at once with a line naming SETTING
  local setting="$1" out rc; shift
  set +e
  out="$(cd "$TMP" && timeout 30 env "$@" 2>&1)"; rc=$?
  set -e
  [ "$rc" = 2 ] && grep -q "$setting" <<<"$out" || { echo "exit $rc: $out" | tail -5; return 1; }
}
ops_check "COSYNC_METRICS_PORT equal to PORT is refused (exit 2)" refused COSYNC_METRICS_PORT PORT=18999 COSYNC_METRICS_PORT=18999 "$BIN" serve
ops_check "COSYNC_METRICS_PORT that is not a port is refused (exit 2)" refused COSYNC_METRICS_PORT COSYNC_METRICS_PORT=metrics "$BIN" serve
ops_check "--metrics-port equal to --port is refused (exit 2)" refused COSYNC_METRICS_PORT "$BIN" serve --port 18998 --metrics-port 18998

echo "metrics test: $([ "$OPS_FAILED" -eq 0 ] && echo PASS || echo FAIL) in $(ops_elapsed "$START") s"
[ "$OPS_FAILED" -eq 0 ]
