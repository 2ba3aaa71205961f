#!/usr/bin/env bash
# PostgreSQL failover test (issue 24): etcd (one member), two PostgreSQL instances under Patroni (a primary
# and a synchronous standby), HAProxy sending connections to whichever one Patroni's REST API calls the
# primary, 3 server nodes whose DATABASE_URL is HAProxy, and nginx in front of the nodes (round robin).
# A mixed end-user load (the multi-node test's: signup + code, completeSignup, login right/wrong, getUser)
# plus readers of the cached routes (getApplication, the app's JWKS) runs through nginx while
#   1. the primary's postmaster is killed with SIGKILL: Patroni (primary_start_timeout 0) fails over to the
#      synchronous standby, and brings the old primary back as a standby;
#   2. later a planned switchover back to the first instance (Patroni's REST API, POST /switchover).
# Checks, each printed PASS/FAIL:
#   1. every acknowledged signup (and completed signup) is in the database exactly once, nothing duplicated;
#   2. the nodes reconnect without a restart (the 3 pids are the ones started; /readyz 200 and a login on each);
#   3. the cached read routes (getApplication, the JWKS) answer during both switches: no error, and no
#      stretch longer than FAILOVER_MAX_CACHED_GAP (1 s) without an answer;
#   4. errors are limited to requests in flight during a switch (none outside the database's outage window),
#      and no request hung.
# It prints the error count, the longest gap without a successful write, and the time from the kill to
# the first successful write. See README.md, Operations, "PostgreSQL failover".
#
# Env: BIN (default .build/debug/cosyncauth; never builds), FAILOVER_SECONDS=45, FAILOVER_WORKERS=5,
# FAILOVER_READERS=2, FAILOVER_KILL_AT=10, FAILOVER_SWITCH_AT (default SECONDS*3/5), FAILOVER_REQUEST_TIMEOUT=10,
# FAILOVER_GRACE=1 (added to each outage window), FAILOVER_MAX_CACHED_GAP=1, FAILOVER_STRICT=true (Patroni's
# synchronous_mode_strict; false to compare), FAILOVER_LOG_LEVEL=warning, FAILOVER_KEEP=1 (keep the
# work folder), FAILOVER_SHOW_ERRORS=1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
# shellcheck source=../../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"

# shellcheck source=../lib/nodes.sh
. "$ROOT/Tests/system/lib/nodes.sh"

LOAD_SECONDS="${FAILOVER_SECONDS:-45}"
WORKERS="${FAILOVER_WORKERS:-5}"
READERS="${FAILOVER_READERS:-2}"
KILL_AT="${FAILOVER_KILL_AT:-10}"
SWITCH_AT="${FAILOVER_SWITCH_AT:-$(( LOAD_SECONDS * 3 / 5 ))}"
REQ_TIMEOUT="${FAILOVER_REQUEST_TIMEOUT:-10}"
GRACE="${FAILOVER_GRACE:-1}"
MAX_CACHED_GAP="${FAILOVER_MAX_CACHED_GAP:-1}"
STRICT="${FAILOVER_STRICT:-true}"
DRIVER="$ROOT/Tests/system/failover/load.py"

missing=()
command -v patroni >/dev/null 2>&1 || missing+=(patroni python3-etcd)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
nodes_setup failover "${missing[@]}"
HAPROXY="$(command -v haproxy || echo /usr/sbin/haproxy)"
PGBIN="$(pg_bin)"

declare -a PG_PORTS=("" "" "") REST_PORTS=("" "" "") PATRONI_PIDS=("" "" "")
ETCD_PID=""; HAPROXY_PID=""

stop_stage() {  # 8 s before KILL: Patroni stops its PostgreSQL first
  nodes_stop_common 8 "$HAPROXY_PID"
  stop_pids 8 "${PATRONI_PIDS[1]}" "${PATRONI_PIDS[2]}"
  # a PostgreSQL whose Patroni did not stop it (Patroni killed): stop it directly
  for i in 1 2; do
    if [ -f "$TMP/pg$i/data/postmaster.pid" ]; then pg_stop "$TMP/pg$i/data" immediate >/dev/null 2>&1 || true; fi
  done
  stop_pids 8 "$ETCD_PID"
}
nodes_on_exit stop_stage "${FAILOVER_KEEP:-0}" 'node*.log' 'patroni*.log' haproxy.log nginx/error.log

# Patroni's REST API of instance $1: GET $2 answers 200 (/primary, /replica, /sync, /health ...)
rest_ok() { curl -sf -m 1 -o /dev/null "http://127.0.0.1:${REST_PORTS[$1]}$2"; }
wait_rest() { wait_until "$3" rest_ok "$1" "$2"; }  # INSTANCE PATH SECONDS
primary_of() { local i; for i in 1 2; do rest_ok "$i" /primary && { echo "$i"; return 0; }; done; echo 0; }
postmaster_pid() { head -1 "$TMP/pg$1/data/postmaster.pid" 2>/dev/null; }

# ---- components -------------------------------------------------------------------------------------
nodes_copy_binary
log "server binary: $BIN ($(stat -c '%s bytes, modified %y' "$BIN" | cut -d. -f1)), copied to the work folder"

ETCD_PORT="$(pg_free_port 23790)"; ETCD_PEER="$(pg_free_port $(( ETCD_PORT + 1 )))"
etcd --name failover --data-dir "$TMP/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
  --initial-cluster "failover=http://127.0.0.1:$ETCD_PEER" --initial-cluster-state new \
  --log-level warn >"$TMP/etcd.log" 2>&1 & ETCD_PID=$!
for _ in $(seq 100); do curl -sf -m 1 -o /dev/null "http://127.0.0.1:$ETCD_PORT/health" && break; sleep 0.1; done
curl -sf -m 1 -o /dev/null "http://127.0.0.1:$ETCD_PORT/health" || die "etcd did not start"
log "etcd $(etcd --version | head -1 | awk '{print $3}') on 127.0.0.1:$ETCD_PORT (one member)"

next=55432
for i in 1 2; do PG_PORTS[$i]="$(pg_free_port "$next")"; next=$(( PG_PORTS[i] + 1 )); done
next=28008
for i in 1 2; do REST_PORTS[$i]="$(pg_free_port "$next")"; next=$(( REST_PORTS[i] + 1 )); done
patroni_conf() {  # INSTANCE
  cat <<YAML
scope: cosync-failover
namespace: /cosync/
name: pg$1
log:
  level: INFO
restapi:
  listen: 127.0.0.1:${REST_PORTS[$1]}
  connect_address: 127.0.0.1:${REST_PORTS[$1]}
etcd3:
  hosts: 127.0.0.1:$ETCD_PORT
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 1
    retry_timeout: 5
    # a crashed primary is not restarted in place: fail over to the synchronous standby at once
    primary_start_timeout: 0
    maximum_lag_on_failover: 1048576
    # only the synchronous standby can be promoted, so every commit a client saw acknowledged is on it
    synchronous_mode: true
    # and never run without a synchronous standby: a commit is acknowledged only once it is on two
    # instances (writes wait while the other instance is down; see README, Operations)
    synchronous_mode_strict: $STRICT
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 200
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 128MB
        synchronous_commit: "on"
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
    - auth: trust
postgresql:
  listen: 127.0.0.1:${PG_PORTS[$1]}
  connect_address: 127.0.0.1:${PG_PORTS[$1]}
  data_dir: $TMP/pg$1/data
  bin_dir: $PGBIN
  pgpass: $TMP/pg$1/pgpass
  authentication:
    superuser:
      username: postgres
      password: failover
    replication:
      username: replicator
      password: failover
    rewind:
      username: postgres
      password: failover
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication replicator 127.0.0.1/32 trust
  parameters:
    unix_socket_directories: $TMP/pg$1
    # the machine does not crash in this test (only processes are killed): the page cache keeps the data
    # (full_page_writes stays on: pg_rewind needs it on the source)
    fsync: "off"
YAML
}
start_patroni() {  # INSTANCE (as the PostgreSQL OS user: initdb and postgres refuse root)
  mkdir -p "$TMP/pg$1"
  patroni_conf "$1" >"$TMP/patroni$1.yml"
  if [ "$(id -u)" -eq 0 ]; then
    chown -R "$PG_OS_USER": "$TMP/pg$1" "$TMP/patroni$1.yml"
    setpriv --reuid="$PG_OS_USER" --regid="$PG_OS_USER" --init-groups -- env HOME="$TMP/pg$1" \
      patroni "$TMP/patroni$1.yml" >>"$TMP/patroni$1.log" 2>&1 &
  else
    HOME="$TMP/pg$1" patroni "$TMP/patroni$1.yml" >>"$TMP/patroni$1.log" 2>&1 &
  fi
  PATRONI_PIDS[$1]=$!
}
start_patroni 1
wait_rest 1 /primary 60 || die "Patroni did not bootstrap instance 1"
start_patroni 2
wait_rest 2 /sync 90 || die "instance 2 did not become the synchronous standby"
log "Patroni $(patroni --version | awk '{print $2}'), PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'): pg1 primary on :${PG_PORTS[1]}, pg2 synchronous standby on :${PG_PORTS[2]} (REST :${REST_PORTS[1]} :${REST_PORTS[2]})"

HA_PORT="$(pg_free_port 55500)"
cat >"$TMP/haproxy.cfg" <<CFG
global
    maxconn 400
defaults
    mode tcp
    timeout connect 1s
    timeout client 1h
    timeout server 1h
    timeout check 1s
listen postgres_primary
    bind 127.0.0.1:$HA_PORT
    # Patroni answers 200 on /primary only on the instance that holds the leader lock and runs as primary
    option httpchk GET /primary
    http-check expect status 200
    # check every 500 ms; down after 2 failures, up after 1 success; when an instance goes down, its
    # open sessions are cut so that no pooled connection stays on a former primary (now read-only)
    default-server inter 500ms fastinter 250ms downinter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
    server pg1 127.0.0.1:${PG_PORTS[1]} maxconn 150 check port ${REST_PORTS[1]}
    server pg2 127.0.0.1:${PG_PORTS[2]} maxconn 150 check port ${REST_PORTS[2]}
CFG
"$HAPROXY" -c -q -f "$TMP/haproxy.cfg" || die "bad HAProxy configuration"
"$HAPROXY" -db -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 & HAPROXY_PID=$!
# HAProxy counts a server up until its checks fail: wait until 6 connections in a row reach the primary
in_a_row=0
for _ in $(seq 100); do
  if [ "$("$PGBIN/psql" -h 127.0.0.1 -p "$HA_PORT" -U postgres -tAc 'SELECT pg_is_in_recovery()' postgres 2>/dev/null)" = f ]; then
    in_a_row=$(( in_a_row + 1 )); [ "$in_a_row" -ge 6 ] && break
  else in_a_row=0; fi
  sleep 0.1
done
[ "$in_a_row" -ge 6 ] || die "HAProxy does not route to the primary"
"$PGBIN/createdb" -h 127.0.0.1 -p "$HA_PORT" -U postgres failover || die "cannot create the database through HAProxy"
export MN_PSQL="$PGBIN/psql" MN_PGPORT="$HA_PORT" MN_DB=failover
log "HAProxy $("$HAPROXY" -v | head -1 | awk '{print $3}') on 127.0.0.1:$HA_PORT -> the instance whose Patroni answers GET /primary 200"

nodes_fake_sendgrid 58632
nodes_env failover "postgres://postgres@127.0.0.1:$HA_PORT/failover?sslmode=disable" "${FAILOVER_LOG_LEVEL:-warning}"
nodes_start 3 18780
FIRST_PIDS="${NODE_PIDS[1]} ${NODE_PIDS[2]} ${NODE_PIDS[3]}"
log "3 nodes ready on ports ${NODE_PORTS[1]} ${NODE_PORTS[2]} ${NODE_PORTS[3]} (pids $FIRST_PIDS), DATABASE_URL -> HAProxy"

NGINX_PORT="$(pg_free_port 18880)"
NGINX_DIR="$TMP/nginx"; mkdir -p "$NGINX_DIR"
# as in the multi-node test, but only refused connections and timeouts before sending go to the next node
nodes_nginx_conf "error timeout" "access_log off;" >"$NGINX_DIR/nginx.conf"
nodes_nginx_start "$NGINX_DIR/nginx.conf"
log "nginx on $LB, round robin over the 3 nodes"

nodes_create_app Failover

# ---- load and faults --------------------------------------------------------------------------------
RESULTS="$TMP/results.json"; STARTED="$TMP/load.started"
log "load: ${LOAD_SECONDS}s, $WORKERS workers (signup + code, completeSignup, login right/wrong, getUser) and $READERS readers (getApplication, JWKS); primary's postmaster SIGKILL at +${KILL_AT}s, switchover back at +${SWITCH_AT}s"
"$PY" "$DRIVER" load --base "$LB" --app-token "$APP_TOKEN" --app-id "$APP_ID" --seconds "$LOAD_SECONDS" --workers "$WORKERS" \
  --readers "$READERS" --timeout "$REQ_TIMEOUT" --mails "$MAILS" --out "$RESULTS" --started "$STARTED" --seed "$RANDOM" & LOAD_PID=$!
nodes_load_started "$STARTED"

# fault 1: SIGKILL the primary's postmaster
sleep_until "$(at "$KILL_AT")"
OLD="$(primary_of)"; [ "$OLD" != 0 ] || die "no primary before the kill"
NEW=$(( 3 - OLD ))
rest_ok "$NEW" /sync || die "pg$NEW is not the synchronous standby before the kill"
PM="$(postmaster_pid "$OLD")"; [ -n "$PM" ] || die "no postmaster.pid for pg$OLD"
event kill; kill -KILL "$PM"
log "fault 1: pg$OLD's postmaster (pid $PM) killed with SIGKILL"
if wait_rest "$NEW" /primary 40; then event promoted; log "pg$NEW promoted by Patroni (REST /primary 200)"; else log "pg$NEW NOT promoted within 40 s"; fi
if wait_rest "$OLD" /sync 60; then event rejoined; log "pg$OLD back as the synchronous standby"; else log "pg$OLD did NOT come back as the synchronous standby within 60 s"; fi

# fault 2: planned switchover back to the first primary (Patroni's REST API, as patronictl switchover does)
sleep_until "$(at "$SWITCH_AT")"
event switchover
SW="$(curl -s -m 30 -X POST "http://127.0.0.1:${REST_PORTS[$NEW]}/switchover" -H 'Content-Type: application/json' \
  -d "{\"leader\":\"pg$NEW\",\"candidate\":\"pg$OLD\"}" -w ' (HTTP %{http_code})' || true)"
log "fault 2: switchover pg$NEW -> pg$OLD requested: $SW"
if wait_rest "$OLD" /primary 40; then event switched; log "pg$OLD is the primary again"; else log "pg$OLD NOT primary within 40 s"; fi
if wait_rest "$NEW" /sync 60; then event switch_rejoined; log "pg$NEW back as the synchronous standby"; else log "pg$NEW did NOT come back as the synchronous standby"; fi

nodes_load_wait
patronictl -c "$TMP/patroni1.yml" list 2>/dev/null | sed 's/^/    /' || true

echo "================ load report ================"
declare -A RESULT
"$PY" "$DRIVER" report --results "$RESULTS" --events "$EVENTS" --grace "$GRACE" --timeout "$REQ_TIMEOUT" \
  --max-cached-gap "$MAX_CACHED_GAP" --status "$TMP/report.status" ${FAILOVER_SHOW_ERRORS:+--show-errors} || true
RESULT[3]="$(sed -n 1p "$TMP/report.status" 2>/dev/null || echo FAIL)"
RESULT[4]="$(sed -n 2p "$TMP/report.status" 2>/dev/null || echo FAIL)"

echo "================ checks ================"
log "1. acknowledged signups (read through HAProxy from the current primary)"
if "$PY" "$DRIVER" verify-signups --results "$RESULTS" --app-id "$APP_ID"; then RESULT[1]=PASS; else RESULT[1]=FAIL; fi
log "2. the nodes reconnected by themselves"
if [ "${NODE_PIDS[1]} ${NODE_PIDS[2]} ${NODE_PIDS[3]}" = "$FIRST_PIDS" ] && kill -0 ${NODE_PIDS[1]} ${NODE_PIDS[2]} ${NODE_PIDS[3]} 2>/dev/null \
   && "$PY" "$DRIVER" serve --results "$RESULTS" --nodes "$(node_url 1),$(node_url 2),$(node_url 3)" --app-token "$APP_TOKEN" --timeout "$REQ_TIMEOUT"; then
  RESULT[2]=PASS; else RESULT[2]=FAIL; fi

echo "================ summary ================"
echo "${RESULT[1]} 1: every acknowledged signup is in the database exactly once, nothing duplicated"
echo "${RESULT[2]} 2: the nodes reconnected without a restart (same pids; /readyz 200 and a login on each)"
echo "${RESULT[3]} 3: the cached read routes (getApplication, JWKS) kept answering during both switches (no error, no gap over ${MAX_CACHED_GAP} s)"
echo "${RESULT[4]} 4: errors only among requests in flight during a switch; none hung"
FINAL=0
for i in 1 2 3 4; do [ "${RESULT[$i]}" = PASS ] || FINAL=1; done
nodes_finish failover
