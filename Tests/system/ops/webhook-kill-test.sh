#!/usr/bin/env bash
# Webhook durability across SIGKILL. A throwaway PostgreSQL, the built server (.build/debug/cosyncauth or
# $BIN) and Tests/system/webhooks/receiver.py (it verifies every request with the `standardwebhooks` package).
# The receiver answers 500 at first; an admin call creates a user, which commits a user.created event;
# once the receiver has seen an attempt the server is killed with SIGKILL and started again, then the
# receiver is healed. Passes when the event arrives (200), every attempt verified and carried the same
# webhook-id, and the database shows the delivery delivered with one logged attempt per request.
#   OPS_KEEP_ON_FAILURE=1 keeps the temp folder (server logs, receiver log) on failure.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
START="$(date +%s.%N)"

# The receiver needs standardwebhooks: the test venv (Tests/test.sh makes it), else $PYTHON if it has it.
WEBHOOK_PYTHON="${COSYNC_TEST_VENV:-$ROOT/.local/test-venv}/bin/python"
if ! "$WEBHOOK_PYTHON" -c "import standardwebhooks" 2>/dev/null; then
  WEBHOOK_PYTHON="$PYTHON"
  "$WEBHOOK_PYTHON" -c "import standardwebhooks" 2>/dev/null \
    || { echo "webhook-kill: no Python with standardwebhooks (run Tests/test.sh once, or pip install standardwebhooks)" >&2; exit 2; }
fi

ops_init webhook-kill
ops_start_pg webhooks
ops_server_env webhooks
export COSYNC_WEBHOOK_ALLOW_HTTP=1 COSYNC_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8 COSYNC_WEBHOOK_RETRY_SECONDS=0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5
export COSYNC_WEBHOOK_TIMEOUT_SECONDS=2 COSYNC_COURIER_POLL_MS=100

RCV="$TMP/receiver"
mkdir -p "$RCV"
echo '{"secrets": [], "failAll": true}' >"$RCV/config.json"
"$WEBHOOK_PYTHON" "$ROOT/Tests/system/webhooks/receiver.py" "$RCV" >"$TMP/receiver.log" 2>&1 &
OPS_PIDS+=("$!")
for _ in $(seq 1 100); do [ -s "$RCV/port" ] && break; sleep 0.05; done
RCV_PORT="$(cat "$RCV/port")"

ops_start_server "$TMP/server1.log"
echo "server pid $SERVER_PID on $BASE; receiver on 127.0.0.1:$RCV_PORT (answering 500)"
ops_create_app "Webhook kill" >/dev/null
HOOK="$(ops_admin POST "/admin/v1/apps/$APP_ID/webhooks" "{\"url\":\"http://127.0.0.1:$RCV_PORT/hook\",\"eventTypes\":[\"user.created\"]}")"
SECRET="$(ops_json secret <<<"$HOOK")"
HOOK_ID="$(ops_json webhookId <<<"$HOOK")"
printf '{"secrets": ["%s"], "failAll": true}' "$SECRET" >"$RCV/config.tmp" && mv "$RCV/config.tmp" "$RCV/config.json"

ops_create_user "killed@example.com" "Kill-pass-1"
for _ in $(seq 1 100); do [ -s "$RCV/received.jsonl" ] && break; sleep 0.1; done
BEFORE="$(wc -l <"$RCV/received.jsonl" 2>/dev/null || echo 0)"
kill -KILL "$SERVER_PID"
set +e; wait "$SERVER_PID"; set -e
SERVER_PID=""
echo "SIGKILL after $BEFORE failed attempt(s)"
EVENTS="$(ops_psql webhooks "SELECT count(*) FROM events WHERE type = 'user.created'")"

ops_start_server "$TMP/server2.log"
echo "restarted: pid $SERVER_PID on $BASE; the receiver now answers 200"
printf '{"secrets": ["%s"]}' "$SECRET" >"$RCV/config.tmp" && mv "$RCV/config.tmp" "$RCV/config.json"
for _ in $(seq 1 600); do grep -q '"status": 200' "$RCV/received.jsonl" && break; sleep 0.1; done
sleep 1

check() {
  RCV="$RCV" "$PYTHON" - <<'PY'
import json, os, sys
rows = [json.loads(l) for l in open(os.path.join(os.environ["RCV"], "received.jsonl"))]
ok = [r for r in rows if r["status"] == 200]
print(f"receiver: {len(rows)} request(s), statuses {[r['status'] for r in rows]}, ids {sorted(set(r['id'] for r in rows))}")
problems = []
if len(ok) != 1: problems.append(f"{len(ok)} successful deliveries, expected 1")
if len({r["id"] for r in rows}) != 1: problems.append("more than one webhook-id")
if not all(r["verified"] == [True] for r in rows): problems.append("a signature did not verify with standardwebhooks")
if not all(r["type"] == "user.created" for r in rows): problems.append("unexpected event type")
print("\n".join(problems) or "every attempt verified, one webhook-id, delivered once")
sys.exit(1 if problems else 0)
PY
}
ops_check "one user.created event committed before the kill ($EVENTS)" test "$EVENTS" = 1
ops_check "the event arrived after the restart, same webhook-id on every attempt, all signatures verified" check
DELIVERY="$(ops_psql webhooks "SELECT status || ' ' || attempts FROM webhook_deliveries WHERE endpoint_id = '$HOOK_ID'")"
LOGGED="$(ops_psql webhooks "SELECT count(*) FROM webhook_attempts WHERE endpoint_id = '$HOOK_ID'")"
REQUESTS="$(wc -l <"$RCV/received.jsonl")"
ops_check "the delivery is marked delivered ($DELIVERY); attempts logged $LOGGED of $REQUESTS requests" \
  bash -c "[ \"${DELIVERY%% *}\" = delivered ] && [ \"$LOGGED\" -ge $((REQUESTS - 1)) ] && [ \"$LOGGED\" -le \"$REQUESTS\" ]"
ops_stop_server
if [ "$OPS_FAILED" -ne 0 ]; then echo "---- server logs ----"; tail -20 "$TMP/server1.log" "$TMP/server2.log"; fi
echo "webhook kill test: $([ "$OPS_FAILED" -eq 0 ] && echo PASS || echo FAIL) in $(ops_elapsed "$START") s"
[ "$OPS_FAILED" -eq 0 ]
