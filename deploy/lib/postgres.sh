# shellcheck shell=bash
# PostgreSQL helpers shared by deploy/run.sh (a persistent private cluster under the project folder)
# and Tests/test.sh (a throwaway cluster). Source this file; functions return non-zero on failure.
#
# initdb refuses to run as root, so when we are root the cluster belongs to a dedicated OS user
# (the `postgres` user that Debian's package creates; we create it when it is missing).

PG_OS_USER="${PG_OS_USER:-postgres}"

pg_log() { printf '%s\n' "$*" >&2; }

# Installs Debian packages (one time); without root, says what to install and fails.
apt_install_as_root() {
  if [ "$(id -u)" -ne 0 ]; then
    pg_log "missing: install the Debian packages $* first (we are not root)."
    return 1
  fi
  pg_log "installing $* with apt-get (one time)..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || return 1
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null || return 1
}

# Installs PostgreSQL from Debian when no initdb is found.
pg_install_if_missing() {
  if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then return 0; fi
  apt_install_as_root postgresql postgresql-client
}

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

# Runs a command as the cluster owner (ourselves unless we are root).
pg_as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u "$PG_OS_USER" -- "$@"; else "$@"; fi
}

pg_ensure_os_user() {
  [ "$(id -u)" -eq 0 ] || return 0
  id "$PG_OS_USER" >/dev/null 2>&1 && return 0
  useradd --system --home-dir /var/lib/postgresql --shell /bin/bash "$PG_OS_USER"
}

# When root owns the project folder, the cluster owner must be able to traverse to it: grant
# search (x, not read) permission on each parent directory that lacks it.
pg_make_traversable() {
  [ "$(id -u)" -eq 0 ] || return 0
  local dir="$1"
  while [ "$dir" != "/" ]; do
    if ! runuser -u "$PG_OS_USER" -- test -x "$dir" 2>/dev/null; then
      chmod o+x "$dir" || return 1
    fi
    dir="$(dirname "$dir")"
  done
}

# A port is free when nothing listens on it and no socket uses it as its local port (an outgoing
# connection may hold it: the test ports lie in Linux's ephemeral range). `ss` when present.
pg_port_free() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 1
  if command -v ss >/dev/null 2>&1 && [ -n "$(ss -Htan "( sport = :$1 )" 2>/dev/null)" ]; then return 1; fi
  return 0
}

# First free TCP port from $1 on (other clusters may hold the usual ones).
pg_free_port() {
  local p
  for p in $(seq "$1" $(( $1 + 200 ))); do
    if pg_port_free "$p"; then echo "$p"; return 0; fi
  done
  return 1
}

# pg_init DATA_DIR: creates a cluster (trust auth on 127.0.0.1 only).
pg_init() {
  local data="$1" bin
  bin="$(pg_bin)"
  mkdir -p "$data" || return 1
  [ "$(id -u)" -eq 0 ] && chown "$PG_OS_USER": "$data"
  chmod 700 "$data"
  pg_as_owner "$bin/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$data/../initdb.log" 2>&1 || {
    cat "$data/../initdb.log" >&2; return 1; }
}

# pg_start DATA_DIR PORT SOCKET_DIR [extra server options]: starts the cluster and waits for it.
pg_start() {
  local data="$1" port="$2" sockets="$3" extra="${4:-}" bin
  bin="$(pg_bin)"
  mkdir -p "$sockets" && { [ "$(id -u)" -ne 0 ] || chown "$PG_OS_USER": "$sockets"; }
  pg_as_owner "$bin/pg_ctl" -D "$data" -l "$data/../server.log" -w -t 60 \
    -o "-p $port -k $sockets -c listen_addresses=127.0.0.1 -c max_connections=200 $extra" start >/dev/null || {
    tail -20 "$data/../server.log" >&2; return 1; }
}

pg_running() { [ -f "$1/postmaster.pid" ] && pg_as_owner "$(pg_bin)/pg_ctl" -D "$1" status >/dev/null 2>&1; }

pg_stop() {
  local data="$1" mode="${2:-fast}"
  pg_running "$data" || return 0
  pg_as_owner "$(pg_bin)/pg_ctl" -D "$data" -m "$mode" -w stop >/dev/null
}

# pg_createdb PORT NAME: creates the database when missing.
pg_createdb() {
  local port="$1" name="$2" bin
  bin="$(pg_bin)"
  if ! "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$name'" postgres | grep -q 1; then
    "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres "$name"
  fi
}

# C libraries the Swift build links: zlib (ZIPFoundation, for legacy export ZIPs) and OpenSSL headers.
build_deps_install_if_missing() {
  local missing=()
  [ -f /usr/include/zlib.h ] || missing+=(zlib1g-dev)
  [ -f /usr/include/openssl/ssl.h ] || missing+=(libssl-dev)
  [ "${#missing[@]}" -eq 0 ] || apt_install_as_root "${missing[@]}"
}
