#!/usr/bin/env bash
# Multi-node fault test: a private PostgreSQL, 3 server nodes of one binary, a fake SendGrid and nginx
# (round robin, X-Forwarded-For) in front. A mixed end-user load runs through nginx for
# MULTINODE_SECONDS while one node is SIGKILLed and restarted, and PostgreSQL is restarted under the
# nodes (which must reconnect by themselves). Then it checks, each printed as PASS/FAIL:
#   1. every acknowledged signup is in the database exactly once, nothing duplicated;
#   2. every outbox e-mail is sent and the fake SendGrid got each message id at least once;
#   3. login lockout counters are shared by the nodes, at exactly the one-node thresholds;
#   4. all 3 nodes serve at the end (/readyz 200 and a login on each).
# Exit 0 only when all pass. See Tests/system/multinode/README.md.
#
# Env: BIN (default .build/debug/cosyncauth; never builds), MULTINODE_SECONDS=60, MULTINODE_WORKERS=6,
# MULTINODE_KILL_AT (default SECONDS/4), MULTINODE_KILL_DOWN=3, MULTINODE_PG_AT (default SECONDS*35/60),
# MULTINODE_PG_DOWN=2, MULTINODE_REQUEST_TIMEOUT=10, MULTINODE_MAIL_WAIT=90, MULTINODE_MAX_LOGIN_ATTEMPTS=6,
# MULTINODE_GRACE=12 (fault window after recovery), MULTINODE_ERROR_PAUSE=0.1 (a worker's pause after a failed request), MULTINODE_LOG_LEVEL=warning, MULTINODE_KEEP=1 (keep the work folder), MULTINODE_SHOW_ERRORS=1,
# MULTINODE_NGINX_TEMPLATE (default Tests/system/nginx/nginx-test.conf.template when it exists).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
# shellcheck source=../../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"

# shellcheck source=../lib/nodes.sh
. "$ROOT/Tests/system/lib/nodes.sh"

LOAD_SECONDS="${MULTINODE_SECONDS:-60}"
WORKERS="${MULTINODE_WORKERS:-6}"
KILL_AT="${MULTINODE_KILL_AT:-$(( LOAD_SECONDS / 4 ))}"
KILL_DOWN="${MULTINODE_KILL_DOWN:-3}"
PG_AT="${MULTINODE_PG_AT:-$(( LOAD_SECONDS * 35 / 60 ))}"
PG_DOWN="${MULTINODE_PG_DOWN:-2}"
REQ_TIMEOUT="${MULTINODE_REQUEST_TIMEOUT:-10}"
MAIL_WAIT="${MULTINODE_MAIL_WAIT:-90}"
MAX_ATTEMPTS="${MULTINODE_MAX_LOGIN_ATTEMPTS:-6}"
GRACE="${MULTINODE_GRACE:-12}"  # covers nginx leaving a failed node out for fail_timeout (10 s in the shared config)
VICTIM=2  # the node that is killed (1-based)
NGINX_TEMPLATE="${MULTINODE_NGINX_TEMPLATE:-$ROOT/Tests/system/nginx/nginx-test.conf.template}"
DRIVER="$ROOT/Tests/system/multinode/load.py"

nodes_setup multinode
if [ "$(id -u)" -eq 0 ]; then chown "$PG_OS_USER": "$TMP"; fi
PG_STARTED=""

stop_stage() {
  nodes_stop_common 3
  if [ -n "$PG_STARTED" ]; then pg_stop "$TMP/data" immediate || true; fi
}
nodes_on_exit stop_stage "${MULTINODE_KEEP:-0}" 'node*.log' nginx/error.log server.log

# ---- components -------------------------------------------------------------------------------------
nodes_copy_binary
log "server binary: $BIN ($(stat -c '%s bytes, modified %y' "$BIN" | cut -d. -f1), sha256 $(sha256sum "$SRV" | cut -c1-12)), copied to the work folder"

PGPORT="$(pg_free_port 57532)"
pg_init "$TMP/data" || die "initdb failed"
pg_start "$TMP/data" "$PGPORT" "$TMP" "-c fsync=off" || die "PostgreSQL did not start"; PG_STARTED=1
pg_createdb "$PGPORT" multinode >/dev/null
MN_PSQL="$(pg_bin)/psql"; export MN_PSQL MN_PGPORT="$PGPORT" MN_DB=multinode
log "PostgreSQL $("$MN_PSQL" -h 127.0.0.1 -p "$PGPORT" -U postgres -tAc 'SHOW server_version' postgres) on 127.0.0.1:$PGPORT"

nodes_fake_sendgrid 58532
nodes_env multinode "postgres://postgres@127.0.0.1:$PGPORT/multinode?sslmode=disable" "${MULTINODE_LOG_LEVEL:-warning}"
nodes_start 3 18580
log "3 nodes ready on ports ${NODE_PORTS[1]} ${NODE_PORTS[2]} ${NODE_PORTS[3]} (pids ${NODE_PIDS[1]} ${NODE_PIDS[2]} ${NODE_PIDS[3]})"
# Passkey ceremonies begun on one node and completed on another (the challenge lives in PostgreSQL).
"$PY" "$ROOT/Tests/system/multinode/passkey_cross_node.py" "$COSYNC_OPERATOR_TOKEN" "$(node_url 1)" "$(node_url 2)" "$(node_url 3)" \
  | sed 's/^/    /' || die "a passkey ceremony did not complete across nodes"
log "passkey ceremonies completed across nodes"
# OAuth refresh-token rotation decided by PostgreSQL: 20 concurrent refreshes over the nodes, then reuse detection.
"$PY" "$ROOT/Tests/system/multinode/refresh_race.py" "$COSYNC_OPERATOR_TOKEN" "$(node_url 1)" "$(node_url 2)" "$(node_url 3)" \
  | sed 's/^/    /' || die "the OAuth refresh race across nodes failed"
log "OAuth refresh race across nodes: one successor, reuse revokes the family"

NGINX_PORT="$(pg_free_port 18680)"
NGINX_DIR="$TMP/nginx"; mkdir -p "$NGINX_DIR/logs"
# The shared test configuration (Tests/system/nginx/nginx-test.conf.template, rendered by its own
# render-test-conf.sh) when it exists and passes `nginx -t`; otherwise nodes_nginx_conf's (Tests/system/lib/nodes.sh).
# In the rendered copy only the access log line gets a format that names the upstream (for the statistics).
UPSTREAM_LOG="log_format upstream '\$msec \$status \$request_method \$uri upstream=\$upstream_addr upstream_status=\$upstream_status rt=\$request_time';"
CONF="$NGINX_DIR/nginx.conf"; NGINX_SOURCE="generated by run.sh (no shared template)"
NGINX_RENDER="$(dirname "$NGINX_TEMPLATE")/render-test-conf.sh"
if [ -f "$NGINX_TEMPLATE" ] && [ -f "$NGINX_RENDER" ]; then
  if bash "$NGINX_RENDER" "$NGINX_DIR" "127.0.0.1:$NGINX_PORT" \
       "127.0.0.1:${NODE_PORTS[1]}" "127.0.0.1:${NODE_PORTS[2]}" "127.0.0.1:${NODE_PORTS[3]}" >/dev/null 2>"$NGINX_DIR/render.err" \
     && ! grep -Eq '^[^#]*non_idempotent' "$CONF" \
     && "$NGINX" -t -q -e "$NGINX_DIR/error.log" -p "$NGINX_DIR" -c "$CONF" >"$NGINX_DIR/t.log" 2>&1; then
    NGINX_SOURCE="${NGINX_TEMPLATE#"$ROOT"/} via ${NGINX_RENDER#"$ROOT"/}"
    sed -i "s|^\([[:space:]]*\)access_log $NGINX_DIR/access.log;|\1$UPSTREAM_LOG\n\1access_log $TMP/nginx-access.log upstream;|" "$CONF"
  else
    log "warning: not using $NGINX_TEMPLATE ($(cat "$NGINX_DIR/render.err" "$NGINX_DIR/t.log" 2>/dev/null | tr '\n' ' ' | cut -c1-300)); generating one"
    rm -f "$CONF"
  fi
fi
# a POST that reached a node is never sent again: only refused connections, timeouts before sending, and
# 502/503 answers go to the next node
[ -f "$CONF" ] || nodes_nginx_conf "error timeout http_502 http_503" "$UPSTREAM_LOG
    access_log $TMP/nginx-access.log upstream;" >"$CONF"
nodes_nginx_start "$CONF"
log "nginx $("$NGINX" -v 2>&1 | sed 's/.*\///') on $LB, round robin over the 3 nodes (configuration $NGINX_SOURCE)"

nodes_create_app Multinode

# ---- load and faults --------------------------------------------------------------------------------
RESULTS="$TMP/results.json"; STARTED="$TMP/load.started"
log "load: ${LOAD_SECONDS}s, $WORKERS workers (signup + code, completeSignup, login right/wrong, getUser); node $VICTIM SIGKILL at +${KILL_AT}s (restart ${KILL_DOWN}s later), PostgreSQL restart at +${PG_AT}s (down ${PG_DOWN}s)"
"$PY" "$DRIVER" load --base "$LB" --app-token "$APP_TOKEN" --seconds "$LOAD_SECONDS" --workers "$WORKERS" \
  --timeout "$REQ_TIMEOUT" --error-pause "${MULTINODE_ERROR_PAUSE:-0.1}" --mails "$MAILS" --out "$RESULTS" --started "$STARTED" --seed "$RANDOM" & LOAD_PID=$!
nodes_load_started "$STARTED"

sleep_until "$(at "$KILL_AT")"
OLD_PID="${NODE_PIDS[$VICTIM]}"
event node_kill; kill -KILL "$OLD_PID"; wait "$OLD_PID" 2>/dev/null || true
log "node $VICTIM killed (SIGKILL, pid $OLD_PID)"
nap "$KILL_DOWN"
event node_restart; start_node "$VICTIM"
if wait_ready "$(node_url "$VICTIM")" 30; then event node_ready; log "node $VICTIM restarted (pid ${NODE_PIDS[$VICTIM]}) and ready"
else log "node $VICTIM did NOT become ready within 30 s after its restart"; fi

sleep_until "$(at "$PG_AT")"
event pg_stop; pg_stop "$TMP/data" immediate || log "pg_ctl stop failed"
log "PostgreSQL stopped (-m immediate)"
nap "$PG_DOWN"
pg_start "$TMP/data" "$PGPORT" "$TMP" "-c fsync=off" || die "PostgreSQL did not start again"
event pg_start; log "PostgreSQL started again on the same port"
all_ready=1
for i in 1 2 3; do wait_ready "$(node_url "$i")" 30 || { all_ready=0; log "node $i: /readyz not 200 within 30 s of the PostgreSQL restart"; }; done
if [ "$all_ready" = 1 ]; then event pg_nodes_ready; log "all 3 nodes ready again (reconnected by themselves; no node restarted)"; fi

nodes_load_wait

echo "================ load report ================"
RESULT5=PASS
"$PY" "$DRIVER" report --results "$RESULTS" --events "$EVENTS" --grace "$GRACE" --timeout "$REQ_TIMEOUT" --victim "$VICTIM" \
  --nginx-log "$TMP/nginx-access.log" --victim-port "${NODE_PORTS[$VICTIM]}" ${MULTINODE_SHOW_ERRORS:+--show-errors} || RESULT5=FAIL

echo "================ checks ================"
declare -A RESULT
for i in 1 3; do
  if [ "${NODE_PIDS[$i]}" != "" ] && kill -0 "${NODE_PIDS[$i]}" 2>/dev/null; then :; else log "node $i (never restarted) is not running"; fi
done
NODES="$(node_url 1),$(node_url 2),$(node_url 3)"

log "4. every node serves (/readyz and a login on each node directly)"
if "$PY" "$DRIVER" serve --results "$RESULTS" --nodes "$NODES" --app-token "$APP_TOKEN" --timeout "$REQ_TIMEOUT" \
   && kill -0 "${NODE_PIDS[1]}" 2>/dev/null && kill -0 "${NODE_PIDS[3]}" 2>/dev/null; then RESULT[4]=PASS; else RESULT[4]=FAIL; fi
echo "${RESULT[4]} 4: all 3 nodes serve at the end (nodes 1 and 3 never restarted)"

log "3. lockout counters shared by the nodes"
if "$PY" "$DRIVER" lockout --nodes "$NODES" --operator-token "$COSYNC_OPERATOR_TOKEN" --max-attempts "$MAX_ATTEMPTS" \
   --timeout "$REQ_TIMEOUT"; then RESULT[3]=PASS; else RESULT[3]=FAIL; fi
echo "${RESULT[3]} 3: login lockout is shared by the nodes at exactly the one-node thresholds"

log "1. acknowledged signups"
if "$PY" "$DRIVER" verify-signups --results "$RESULTS" --app-id "$APP_ID"; then RESULT[1]=PASS; else RESULT[1]=FAIL; fi
echo "${RESULT[1]} 1: every acknowledged signup is in the database exactly once, nothing duplicated"

log "2. outbox delivery (waiting up to ${MAIL_WAIT}s: a message claimed by a killed node, or whose 'sent' mark was lost in the PostgreSQL restart, waits for its 60 s lease)"
if "$PY" "$DRIVER" verify-mail --mails "$MAILS" --wait "$MAIL_WAIT"; then RESULT[2]=PASS; else RESULT[2]=FAIL; fi
echo "${RESULT[2]} 2: every queued e-mail is sent and received by the fake SendGrid at least once"

echo "================ summary ================"
FINAL=0
RESULT[5]=$RESULT5
echo "${RESULT[5]} 5: every request got an answer (a request caught by a fault fails, it never hangs)"
for i in 1 2 3 4 5; do
  echo "${RESULT[$i]} $i"
  [ "${RESULT[$i]}" = PASS ] || FINAL=1
done
nodes_finish multinode
