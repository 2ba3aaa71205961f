# shellcheck shell=bash
# Start-up shared by the black-box stages that run the built server on a live port (Tests/system/oauth/run.sh,
# Tests/system/portal/run.sh). Source it after deploy/lib/postgres.sh.
#
#   server_database NAME WORK    a fresh database NAME (dropped first when it exists); sets SERVER_DATABASE_URL.
#                                The PostgreSQL is the caller's: PGPORT (127.0.0.1, user postgres, trust, as
#                                Tests/test.sh starts) or DATABASE_URL (its database part is replaced by NAME).
#                                Neither: a throwaway cluster under WORK/pg, which server_cleanup stops.
#   server_start PORT LOG [VAR=value ...]
#                                starts $BIN serve on 127.0.0.1:PORT against SERVER_DATABASE_URL, with a cheap
#                                bcrypt cost, e-mail and SMS to the log, no metrics port, and then the caller's
#                                VAR=value pairs (COSYNC_PUBLIC_URL, COSYNC_OPERATOR_TOKEN, COSYNC_MASTER_KEY,
#                                LOG_LEVEL, ...; a pair overrides a default). Waits for /healthz (30 s); sets
#                                SERVER_PID; fails (after printing the log's tail) when the server does not come up.
#   server_cleanup               stops the server (TERM, then KILL after 5 s) and the throwaway cluster, if any.
#
# BIN (default .build/debug/cosyncauth) and PYTHON (default python3, for the readiness probe) are read.

SERVER_PID=""
SERVER_OWN_PG=""
SERVER_DATABASE_URL=""

server_database() {
  local name="$1" work="$2" admin_url base query
  if [ -z "${PGPORT:-}" ] && [ -z "${DATABASE_URL:-}" ]; then
    pg_install_if_missing || return 1
    pg_ensure_os_user || return 1
    mkdir -p "$work/pg" || return 1
    [ "$(id -u)" -ne 0 ] || chown "$PG_OS_USER": "$work/pg"
    PGPORT="$(pg_free_port 56632)" || return 1
    pg_init "$work/pg/data" || return 1
    pg_start "$work/pg/data" "$PGPORT" "$work/pg" "-c fsync=off -c synchronous_commit=off -c full_page_writes=off" || return 1
    SERVER_OWN_PG="$work/pg/data"
  fi
  if [ -n "${PGPORT:-}" ]; then
    admin_url="postgres://postgres@127.0.0.1:$PGPORT/postgres?sslmode=disable"
    SERVER_DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/$name?sslmode=disable"
  else
    base="${DATABASE_URL%%\?*}"
    query=""
    [ "$base" = "$DATABASE_URL" ] || query="?${DATABASE_URL#*\?}"
    admin_url="${base%/*}/postgres$query"
    SERVER_DATABASE_URL="${base%/*}/$name$query"
  fi
  PGOPTIONS="-c client_min_messages=warning" "$(pg_bin)/psql" "$admin_url" -qc "DROP DATABASE IF EXISTS \"$name\"" \
    -c "CREATE DATABASE \"$name\"" >/dev/null
}

server_start() {
  local port="$1" log="$2" ready=""
  shift 2
  env DATABASE_URL="$SERVER_DATABASE_URL" PORT="$port" HOST=127.0.0.1 COSYNC_BCRYPT_COST=4 \
    COSYNC_EMAIL_TRANSPORT=log COSYNC_SMS_TRANSPORT=log COSYNC_METRICS_PORT=off "$@" \
    "${BIN:-.build/debug/cosyncauth}" serve >"$log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 300); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    if "${PYTHON:-python3}" -c "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$port/healthz', timeout=2).status == 200 else 1)" 2>/dev/null; then
      ready=1; break
    fi
    sleep 0.1
  done
  if [ -z "$ready" ]; then
    echo "the server did not come up on 127.0.0.1:$port; its log (last 80 lines):" >&2
    tail -80 "$log" >&2 || true
    return 1
  fi
}

server_cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
  if [ -n "$SERVER_OWN_PG" ]; then pg_stop "$SERVER_OWN_PG" immediate || true; SERVER_OWN_PG=""; fi
}
