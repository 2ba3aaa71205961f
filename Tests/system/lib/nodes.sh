# shellcheck shell=bash
# Shared by the stages that run several server nodes behind nginx under a load (Tests/system/multinode/run.sh,
# Tests/system/failover/run.sh). Source it after deploy/lib/postgres.sh, with ROOT set and `set -euo pipefail`.
# It sets BIN (default $ROOT/.build/debug/cosyncauth), PY (PYTHON, default python3), STARTED_AT, and defines:
#
#   log MESSAGE / die MESSAGE    a line with the seconds since the start / the same as an error, then exit 1
#   nodes_setup NAME [PACKAGE ...]
#                                checks BIN and PostgreSQL, installs nginx and the stage's other missing Debian
#                                PACKAGES; sets NGINX, TMP (/tmp/cosync-NAME.XXXXXX) and EVENTS (empty file)
#   nodes_on_exit STOP KEEP GLOB ...
#                                on exit: runs the stage's function STOP (its processes: nodes_stop_common and
#                                the rest), prints the last lines of the files $TMP/GLOB when the stage failed,
#                                and removes TMP unless KEEP is 1. The stage sets FINAL=0 once all checks passed.
#   stop_pids SECONDS PID ...    TERM all at once, KILL what is left after SECONDS (empty PIDs are skipped)
#   nodes_stop_common SECONDS [PID ...]
#                                stop_pids of the nap, the load driver, the nodes, nginx, the fake SendGrid and PIDs
#   event NAME                   appends "NAME <epoch seconds>" to EVENTS (read by load.py report)
#   nap SECONDS / sleep_until EPOCH
#                                sleeps (a signal ends the sleep at once)
#   wait_until SECONDS COMMAND [ARG ...]
#                                runs COMMAND every 0.1 s until it succeeds (status 0) or SECONDS pass (status 1)
#   ready URL / wait_ready URL SECONDS
#                                URL/readyz answers 200 (now / within SECONDS)
#   nodes_copy_binary            copies BIN to SRV=$TMP/cosyncauth (all nodes, and a restarted one, run the same
#                                program even if the tree is relinked meanwhile)
#   nodes_fake_sendgrid PORT     the fake SendGrid (tools/bench/fake_sendgrid.py) on a free port from PORT;
#                                sets FAKE_PORT, MAILS (its JSON lines), FAKE_PID
#   nodes_env NAME DATABASE_URL LOG_LEVEL
#                                exports the nodes' environment: the database, a new master key and operator
#                                token (COSYNC_OPERATOR_TOKEN), e-mail to the fake SendGrid, nginx trusted, ...
#   nodes_start COUNT PORT       starts COUNT nodes at once on free ports from PORT (NODE_PORTS[1..COUNT],
#                                NODE_PIDS[...], logs $TMP/nodeI.log) and waits for their /readyz (60 s)
#   start_node I / node_url I    (re)starts node I on its port / its base URL
#   nodes_nginx_conf NEXT_UPSTREAM ACCESS_LOG
#                                an nginx configuration (stdout): NGINX_PORT round robin over the nodes, with
#                                proxy_next_upstream NEXT_UPSTREAM and the ACCESS_LOG lines; files in NGINX_DIR
#   nodes_nginx_start CONF       checks and starts nginx (in the foreground, as a child) with CONF; sets NGINX_PID
#                                and LB (http://127.0.0.1:NGINX_PORT) and waits until LB/readyz answers (20 s)
#   nodes_create_app NAME        an app (signupFlow code) through LB; sets APP_TOKEN and APP_ID
#   nodes_load_started STARTED   waits until the load driver wrote its start time to STARTED; sets T0
#   at SECONDS                   T0 + SECONDS (for sleep_until)
#   nodes_load_wait              waits for LOAD_PID; dies when the load driver failed
#   nodes_finish NAME            prints "NAME: PASS (Ns)" or FAIL by FINAL and exits with FINAL

BIN="${BIN:-$ROOT/.build/debug/cosyncauth}"
PY="${PYTHON:-python3}"
STARTED_AT="$(date +%s.%N)"
declare -a NODE_PIDS=("" "" "" "") NODE_PORTS=("" "" "" "")
FAKE_PID=""; NGINX_PID=""; LOAD_PID=""; SLEEP_PID=""; FINAL=1
NODES_STOP=""; NODES_KEEP=0; NODES_LOGS=()

log() { printf '[%6.1fs] %s\n' "$(awk -v a="$STARTED_AT" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$*"; }
die() { log "ERROR: $*" >&2; exit 1; }

nodes_setup() {
  local name="$1" missing=("${@:2}")
  [ -f "$BIN" ] || die "no server binary at $BIN (build it first; this script never builds)"
  pg_install_if_missing || die "PostgreSQL is missing"
  pg_ensure_os_user
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
  [ "${#missing[@]}" -eq 0 ] || apt_install_as_root "${missing[@]}" || die "missing: ${missing[*]}"
  NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
  TMP="$(mktemp -d "/tmp/cosync-$name.XXXXXX")"; chmod 755 "$TMP"
  EVENTS="$TMP/events"; : >"$EVENTS"
}

stop_pids() {
  local wait="$1" pid live=()
  shift
  for pid in "$@"; do [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && live+=("$pid"); done
  for _ in $(seq $(( wait * 10 ))); do
    local any=""
    for pid in "${live[@]}"; do kill -0 "$pid" 2>/dev/null && any=1; done
    [ -n "$any" ] || break
    sleep 0.1
  done
  for pid in "${live[@]}"; do kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
}
nodes_stop_common() {
  local wait="$1"
  shift
  stop_pids "$wait" "$SLEEP_PID" "$LOAD_PID" "${NODE_PIDS[@]:1}" "$NGINX_PID" "$FAKE_PID" "$@"
}

nodes_on_exit() {
  NODES_STOP="$1"; NODES_KEEP="$2"; NODES_LOGS=("${@:3}")
  trap nodes_cleanup EXIT
  trap 'exit 130' INT; trap 'exit 143' TERM
}
nodes_cleanup() {
  local status=$? glob f
  trap - EXIT INT TERM
  "$NODES_STOP" || true
  if [ "$status" -ne 0 ] || [ "$FINAL" -ne 0 ]; then
    for glob in "${NODES_LOGS[@]}"; do
      for f in "$TMP"/$glob; do
        [ -s "$f" ] || continue
        echo "---- last lines of $(basename "$f") ----"; tail -n 15 "$f"
      done
    done
  fi
  if [ "$NODES_KEEP" = "1" ]; then echo "work folder kept: $TMP"; else rm -rf "$TMP"; fi
  exit "$status"
}

event() { echo "$1 $(date +%s.%N)" >>"$EVENTS"; }
nap() { sleep "$1" & SLEEP_PID=$!; wait "$SLEEP_PID"; SLEEP_PID=""; }  # a signal ends it at once
sleep_until() {  # epoch seconds (fractional)
  local d
  d="$(awk -v t="$1" -v n="$(date +%s.%N)" 'BEGIN{d=t-n; if (d<0) d=0; printf "%.3f", d}')"
  nap "$d"
}
wait_until() {  # SECONDS COMMAND [ARG ...]: runs COMMAND every 0.1 s until it succeeds (0) or SECONDS pass (1)
  local until; until=$(( $(date +%s) + $1 ))
  shift
  while [ "$(date +%s)" -lt "$until" ]; do "$@" && return 0; sleep 0.1; done
  return 1
}
ready() { curl -sf -m 2 -o /dev/null "$1/readyz"; }
wait_ready() { wait_until "$2" ready "$1"; }  # URL SECONDS

nodes_copy_binary() {
  local try
  SRV="$TMP/cosyncauth"
  for try in 1 2 3 4 5 6; do
    cp "$BIN" "$SRV" 2>/dev/null && "$SRV" --help >/dev/null 2>&1 && break
    [ "$try" -lt 6 ] || die "cannot copy a working $BIN"
    sleep 5
  done
}

nodes_fake_sendgrid() {
  FAKE_PORT="$(pg_free_port "$1")"; MAILS="$TMP/mails.jsonl"; : >"$MAILS"
  "$PY" "$ROOT/tools/bench/fake_sendgrid.py" "$FAKE_PORT" "$MAILS" & FAKE_PID=$!
}

nodes_env() {  # NAME DATABASE_URL LOG_LEVEL
  export DATABASE_URL="$2"
  unset COSYNC_SQL_DIR  # the nodes use the migrations built into the binary
  # A request caught by a database outage is answered 503 after this, well inside the client timeout.
  export COSYNC_REQUEST_TIMEOUT_SECONDS="${COSYNC_REQUEST_TIMEOUT_SECONDS:-4}"
  COSYNC_MASTER_KEY="$(head -c 32 /dev/urandom | base64)"
  COSYNC_OPERATOR_TOKEN="cop_$1_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  export COSYNC_MASTER_KEY COSYNC_OPERATOR_TOKEN
  export COSYNC_EMAIL_TRANSPORT=sendgrid COSYNC_SENDGRID_API_KEY="SG.$1" COSYNC_SENDGRID_BASE_URL="http://127.0.0.1:$FAKE_PORT"
  export COSYNC_COURIER_POLL_MS=100 COSYNC_TRUSTED_PROXIES=127.0.0.1/32 COSYNC_BCRYPT_COST=4 HOST=127.0.0.1
  export LOG_LEVEL="$3"
  # Several nodes on one host: the default metrics port (9464) would be taken by the first; nothing here scrapes.
  export COSYNC_METRICS_PORT=off
}

start_node() {
  PORT="${NODE_PORTS[$1]}" "$SRV" serve >>"$TMP/node$1.log" 2>&1 &
  NODE_PIDS[$1]=$!
}
node_url() { echo "http://127.0.0.1:${NODE_PORTS[$1]}"; }
nodes_start() {  # COUNT PORT
  local i next="$2"
  for i in $(seq "$1"); do NODE_PORTS[$i]="$(pg_free_port "$next")"; next=$(( NODE_PORTS[i] + 1 )); done
  for i in $(seq "$1"); do start_node "$i"; done  # at once: the migrations must be safe on many nodes
  for i in $(seq "$1"); do wait_ready "$(node_url "$i")" 60 || die "node $i did not become ready"; done
}

nodes_nginx_conf() {  # NEXT_UPSTREAM ACCESS_LOG
  local port
  [ "$(id -u)" -eq 0 ] && echo "user nobody nogroup;"
  cat <<EOF
worker_processes 1;
daemon off;
pid $NGINX_DIR/nginx.pid;
error_log $NGINX_DIR/error.log warn;
events { worker_connections 1024; }
http {
    client_body_temp_path $NGINX_DIR/client_body;
    proxy_temp_path $NGINX_DIR/proxy;
    fastcgi_temp_path $NGINX_DIR/fastcgi;
    uwsgi_temp_path $NGINX_DIR/uwsgi;
    scgi_temp_path $NGINX_DIR/scgi;
    $2
    upstream cosync {
        # round robin; a node that refuses a connection is skipped for 2 s
$(for port in "${NODE_PORTS[@]:1}"; do [ -z "$port" ] || echo "        server 127.0.0.1:$port max_fails=1 fail_timeout=2s;"; done)
    }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        client_max_body_size 1m;
        location / {
            proxy_pass http://cosync;
            proxy_http_version 1.1;
            proxy_set_header Host \$host;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            # a POST that reached a node is never sent again (no non_idempotent)
            proxy_next_upstream $1;
            proxy_connect_timeout 1s;
            proxy_read_timeout 30s;
        }
    }
}
EOF
}

nodes_nginx_start() {  # CONF
  local args=(-e "$NGINX_DIR/error.log" -p "$NGINX_DIR" -c "$1")
  "$NGINX" -t -q "${args[@]}" || die "bad nginx configuration $1"
  grep -Eq '^[[:space:]]*daemon[[:space:]]+off' "$1" || args+=(-g 'daemon off;')  # stay in the foreground: our child
  "$NGINX" "${args[@]}" 2>>"$NGINX_DIR/error.log" & NGINX_PID=$!
  LB="http://127.0.0.1:$NGINX_PORT"
  wait_ready "$LB" 20 || die "nginx does not answer on $LB"
}

nodes_create_app() {  # NAME
  local json
  json="$(curl -sf -X POST "$LB/admin/v1/apps" -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN" \
    -H 'Content-Type: application/json' -d "{\"name\":\"$1\",\"signupFlow\":\"code\"}")" || die "cannot create the app"
  APP_TOKEN="$("$PY" -c 'import json,sys; print(json.load(sys.stdin)["appToken"])' <<<"$json")"
  APP_ID="$("$PY" -c 'import json,sys; print(json.load(sys.stdin)["appId"])' <<<"$json")"
}

nodes_load_started() {  # STARTED
  for _ in $(seq 300); do [ -s "$1" ] && break; sleep 0.1; done
  [ -s "$1" ] || die "the load driver did not start"
  T0="$(cat "$1")"
}
at() { awk -v a="$T0" -v b="$1" 'BEGIN{printf "%.3f", a+b}'; }

nodes_load_wait() {
  local status=0
  wait "$LOAD_PID" || status=$?
  LOAD_PID=""
  [ "$status" -eq 0 ] || die "the load driver failed ($status)"
  log "load finished"
}

nodes_finish() {  # NAME
  local elapsed
  elapsed="$(awk -v a="$STARTED_AT" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}')"
  if [ "$FINAL" -eq 0 ]; then echo "$1: PASS (${elapsed}s)"; else echo "$1: FAIL (${elapsed}s)"; fi
  exit "$FINAL"
}
