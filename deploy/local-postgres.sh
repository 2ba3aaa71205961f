#!/usr/bin/env bash
# A private PostgreSQL cluster under the project folder (.local/pg, git-ignored), for running the
# server locally. `start` (default) creates it on first use on a free port, starts it and prints its
# DATABASE_URL; run again, it reuses the same cluster, port and data. `stop` stops it; `url` prints
# the URL.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"

BASE="$ROOT/.local/pg"
DATA="$BASE/data"
DB="${COSYNC_DB_NAME:-cosyncauth}"

url() { echo "postgres://postgres@127.0.0.1:$(cat "$BASE/port")/$DB?sslmode=disable"; }

start() {
  pg_install_if_missing
  pg_ensure_os_user
  mkdir -p "$BASE"
  pg_make_traversable "$BASE"
  [ "$(id -u)" -eq 0 ] && chown "$PG_OS_USER": "$BASE"
  if [ ! -f "$DATA/PG_VERSION" ]; then
    pg_log "creating a private PostgreSQL cluster in $DATA"
    pg_init "$DATA"
  fi
  if ! pg_running "$DATA"; then
    local port
    port="$(cat "$BASE/port" 2>/dev/null || true)"
    if [ -z "$port" ] || ! pg_port_free "$port"; then port="$(pg_free_port 55432)"; fi
    echo "$port" > "$BASE/port"
    pg_start "$DATA" "$port" "$BASE/sockets"
  fi
  pg_createdb "$(cat "$BASE/port")" "$DB"
  url
}

case "${1:-start}" in
  start) start ;;
  stop) pg_stop "$DATA" ;;
  url) url ;;
  *) echo "usage: deploy/local-postgres.sh [start|stop|url]" >&2; exit 2 ;;
esac
