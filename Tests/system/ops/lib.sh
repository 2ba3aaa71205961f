# shellcheck shell=bash
# shellcheck disable=SC2034  # SERVER_RC, RAW_PUBLIC_KEY…: read by the scripts that source this file
# Shared helpers of the Tests/system/ops/*-test.sh scripts: a throwaway PostgreSQL, the already-built server
# (.build/debug/cosyncauth, or $BIN) on a free 127.0.0.1 port, and the admin / end-user calls they need.
# Source it after `set -euo pipefail`; call ops_init NAME first. Everything ops_init creates (the temp
# folder, the cluster, the server, any pid added to OPS_PIDS) is removed on exit, even on failure.
#
# The server runs with its working directory in the temp folder and without COSYNC_SQL_DIR: it must
# use the migrations embedded in the binary.

OPS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$OPS_DIR/../../.." && pwd)"
# shellcheck source=../../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"

BIN="${BIN:-$ROOT/.build/debug/cosyncauth}"
PYTHON="${PYTHON:-python3}"
TMP=""
PGPORT=""
SERVER_PID=""
OPS_PIDS=()
OPS_FAILED=0

ops_say() { printf '%s\n' "$*"; }
ops_elapsed() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }

# PASS/FAIL bookkeeping: ops_check NAME COMMAND... runs the command and prints one line.
ops_pass() { printf 'PASS  %s\n' "$1"; }
ops_fail() { printf 'FAIL  %s\n' "$1"; OPS_FAILED=$((OPS_FAILED + 1)); }
ops_check() {
  local name="$1"; shift
  if "$@"; then ops_pass "$name"; else ops_fail "$name"; fi
}

ops_cleanup() {
  local rc=$?
  set +e
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -KILL "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null
  fi
  local p
  for p in "${OPS_PIDS[@]+"${OPS_PIDS[@]}"}"; do
    kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  if [ -n "$TMP" ] && [ -d "$TMP" ]; then
    [ -d "$TMP/data" ] && pg_stop "$TMP/data" immediate >/dev/null 2>&1
    if [ "$rc" -ne 0 ] && [ -n "${OPS_KEEP_ON_FAILURE:-}" ]; then
      echo "kept $TMP (OPS_KEEP_ON_FAILURE)" >&2
    else
      rm -rf "$TMP"
    fi
  fi
  exit "$rc"
}

# ops_init NAME: checks the binary, PostgreSQL and python, makes the temp folder, arms the cleanup.
ops_init() {
  [ -x "$BIN" ] || { echo "$1: no server binary at $BIN (set BIN, or build it)" >&2; exit 2; }
  command -v "$PYTHON" >/dev/null || { echo "$1: $PYTHON not found" >&2; exit 2; }
  command -v curl >/dev/null || { echo "$1: curl not found" >&2; exit 2; }
  pg_install_if_missing; pg_ensure_os_user
  TMP="$(mktemp -d "${TMPDIR:-/tmp}/cosync-$1.XXXXXX")"
  chmod 755 "$TMP"
  if [ "$(id -u)" -eq 0 ]; then chown "$PG_OS_USER": "$TMP"; fi
  trap ops_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# ops_start_pg DB...: a cluster on a free port with the databases named; sets PGPORT.
ops_start_pg() {
  # Ports below the kernel's ephemeral range (32768+), where outgoing connections cannot hold them;
  # a few tries, as another process may take the port between the probe and the bind.
  local base=$((25400 + RANDOM % 2000)) try
  pg_init "$TMP/data"
  for try in 1 2 3 4 5; do
    PGPORT="$(pg_free_port "$base")"
    if pg_start "$TMP/data" "$PGPORT" "$TMP" "-c fsync=off -c synchronous_commit=off" 2>"$TMP/pg_start.err"; then break; fi
    [ "$try" -lt 5 ] || { cat "$TMP/pg_start.err" >&2; return 1; }
    base=$((PGPORT + 1))
  done
  local db
  for db in "$@"; do pg_createdb "$PGPORT" "$db"; done
}

ops_db_url() { echo "postgres://postgres@127.0.0.1:$PGPORT/$1?sslmode=disable"; }
ops_psql() { "$(pg_bin)/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -d "$1" -tAc "$2"; }

# ops_server_env DB: the server's settings (a fresh master key and operator token each run).
ops_server_env() {
  export DATABASE_URL; DATABASE_URL="$(ops_db_url "$1")"
  export COSYNC_MASTER_KEY; COSYNC_MASTER_KEY="$(head -c 32 /dev/urandom | base64)"
  export COSYNC_OPERATOR_TOKEN; COSYNC_OPERATOR_TOKEN="cop_ops_$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  export HOST=127.0.0.1 COSYNC_BCRYPT_COST=4 LOG_LEVEL="${LOG_LEVEL:-info}"
  export COSYNC_EMAIL_TRANSPORT=log COSYNC_SMS_TRANSPORT=log COSYNC_SHUTDOWN_DRAIN_SECONDS=1
  unset COSYNC_SQL_DIR
}

# ops_start_server LOG [VAR=value...]: starts `cosyncauth serve` on a free port (sets HTTP_PORT, BASE,
# SERVER_PID), its metrics listener on another (sets METRICS_PORT, METRICS_BASE; COSYNC_METRICS_PORT=off
# among the VARs turns it off), and waits until /readyz answers 200.
ops_start_server() {
  local log="$1"; shift
  OPS_SERVER_LOG="$log"
  local try _ rc base=$((18700 + RANDOM % 2000))
  for try in 1 2 3; do
    HTTP_PORT="$(pg_free_port "$base")"
    METRICS_PORT="$(pg_free_port $((HTTP_PORT + 1)))"
    BASE="http://127.0.0.1:$HTTP_PORT"
    METRICS_BASE="http://127.0.0.1:$METRICS_PORT"
    (cd "$TMP" && exec env PORT="$HTTP_PORT" COSYNC_METRICS_PORT="$METRICS_PORT" "$@" "$BIN" serve) >"$log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 300); do
      if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        set +e; wait "$SERVER_PID"; rc=$?; set -e
        SERVER_PID=""
        # the port was taken between the probe and the bind: another one
        if [ "$try" -lt 3 ] && grep -qi 'address already in use' "$log"; then base=$((METRICS_PORT + 1)); continue 2; fi
        echo "the server exited at start (code $rc); log:" >&2; tail -40 "$log" >&2; return 1
      fi
      if [ "$(curl -s -o /dev/null -w '%{http_code}' -m 2 "$BASE/readyz")" = "200" ]; then return 0; fi
      sleep 0.1
    done
    echo "the server did not become ready on $BASE; log:" >&2; tail -40 "$log" >&2
    return 1
  done
}

# ops_stop_server [LIMIT_SECONDS]: SIGTERM, wait (then SIGKILL); sets SERVER_RC and SERVER_STOP_SECONDS.
ops_stop_server() {
  local limit="${1:-25}" start _
  SERVER_RC=""
  [ -n "$SERVER_PID" ] || return 0
  start="$(date +%s.%N)"
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  for _ in $(seq 1 $((limit * 10))); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$SERVER_PID" 2>/dev/null && kill -KILL "$SERVER_PID" 2>/dev/null
  set +e; wait "$SERVER_PID"; SERVER_RC=$?; set -e
  SERVER_STOP_SECONDS="$(ops_elapsed "$start")"
  # Killed by a signal or a trap (128+): the server's last words, so a CI log says why.
  if [ "$SERVER_RC" -ge 128 ] && [ -n "${OPS_SERVER_LOG:-}" ] && [ -f "$OPS_SERVER_LOG" ]; then
    echo "the server ended with code $SERVER_RC; what it said about a crash, then its last lines:" >&2
    grep -n -m1 -A60 -E 'Fatal error|crashed|Program crashed' "$OPS_SERVER_LOG" >&2 || true
    tail -15 "$OPS_SERVER_LOG" >&2
  fi
  SERVER_PID=""
}

# ops_json KEY: one top-level key of the JSON object on stdin ("" when missing).
ops_json() { "$PYTHON" -c 'import json,sys; v=json.load(sys.stdin).get(sys.argv[1]); print("" if v is None else (v if isinstance(v,str) else json.dumps(v)))' "$1"; }

# ops_http METHOD URL [curl args...]: prints the body, then a last line with the HTTP status.
ops_http() {
  local method="$1" url="$2"; shift 2
  curl -s -m 15 -X "$method" -w '\n%{http_code}' "$@" "$url"
}

# ops_admin METHOD PATH [JSON]: an operator call; prints the body; fails unless 2xx.
ops_admin() {
  local out status
  out="$(ops_http "$1" "$BASE$2" -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN" -H 'Content-Type: application/json' ${3:+--data-binary "$3"})"
  status="${out##*$'\n'}"
  printf '%s\n' "${out%$'\n'*}"
  case "$status" in 2??) return 0 ;; *) echo "admin $1 $2 -> $status: ${out%$'\n'*}" >&2; return 1 ;; esac
}

# ops_create_app NAME [EXTRA_JSON_MEMBERS]: sets APP_ID, APP_TOKEN, RAW_PUBLIC_KEY (and APP_JSON).
ops_create_app() {
  local body="{\"name\":\"$1\"${2:+,$2}}"
  APP_JSON="$(ops_admin POST /admin/v1/apps "$body")"
  APP_ID="$(ops_json appId <<<"$APP_JSON")"
  APP_TOKEN="$(ops_json appToken <<<"$APP_JSON")"
  RAW_PUBLIC_KEY="$(ops_json rawPublicKey <<<"$APP_JSON")"
  [ -n "$APP_ID" ] && [ -n "$APP_TOKEN" ]
}

# ops_create_user HANDLE PASSWORD (plaintext): an active user with a password, made by the operator.
ops_create_user() {
  ops_admin POST "/admin/v1/apps/$APP_ID/users" "{\"handle\":\"$1\",\"password\":\"$2\"}" >/dev/null
}

ops_md5() { printf '%s' "$1" | md5sum | cut -d' ' -f1; }

# ops_login HANDLE PASSWORD [APP_TOKEN]: the legacy end-user login; prints the body, then the status line.
ops_login() {
  ops_http POST "$BASE/api/appuser/login" -H "app-token: ${3:-$APP_TOKEN}" \
    --data-urlencode "handle=$1" --data-urlencode "password=$(ops_md5 "$2")"
}

# ops_get_application [APP_TOKEN]: prints the body, then the status line.
ops_get_application() { ops_http GET "$BASE/api/appuser/getApplication" -H "app-token: ${1:-$APP_TOKEN}"; }

ops_status_of() { printf '%s' "${1##*$'\n'}"; }
ops_body_of() { printf '%s' "${1%$'\n'*}"; }

# ops_verify_jwt JWT RAW_PUBLIC_KEY: checks an RS256 JWT's signature against rawPublicKey (base64 of the
# SPKI PEM) with openssl. Prints why on failure.
ops_verify_jwt() {
  local dir; dir="$(mktemp -d "$TMP/jwt.XXXXXX")"
  JWT="$1" KEY="$2" DIR="$dir" "$PYTHON" - <<'PY' || return 1
import base64, json, os, subprocess, sys
jwt, key, d = os.environ["JWT"], os.environ["KEY"], os.environ["DIR"]
def b64url(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
try:
    h, p, s = jwt.split(".")
    header = json.loads(b64url(h))
except ValueError as e:
    sys.exit(f"not a JWT: {e}")
if header.get("alg") != "RS256":
    sys.exit(f"alg is {header.get('alg')}, not RS256")
open(f"{d}/pub.pem", "wb").write(base64.b64decode(key))
open(f"{d}/sig", "wb").write(b64url(s))
open(f"{d}/data", "wb").write(f"{h}.{p}".encode())
r = subprocess.run(["openssl", "dgst", "-sha256", "-verify", f"{d}/pub.pem", "-signature", f"{d}/sig", f"{d}/data"],
                   capture_output=True, text=True)
if r.returncode != 0:
    sys.exit("signature does not verify: " + (r.stdout + r.stderr).strip())
PY
}
