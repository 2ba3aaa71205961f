#!/usr/bin/env bash
# The browser test of issue 22: Apache httpd + mod_auth_openidc protecting a page, Debian's Chromium driven by
# Selenium through the hosted login page (password + TOTP, then a passkey in Chrome's virtual authenticator),
# and axe-core on the hosted page. See browser_login.py for the checks.
#
# It starts its own server: the public URL must be https://auth.cosync.localhost:<port> (a passkey needs a
# secure origin whose host is a domain; the RP ID is cosync.localhost), served by this test's Apache as a TLS
# front to the server's plain port. Everything listens on 127.0.0.1; Apache runs unprivileged with its
# own configuration (httpd.conf here) in a temp directory; every process started here is stopped on exit.
#
# Environment:
#   BIN       the built server (default: .build/debug/cosyncauth)
#   PGPORT    a PostgreSQL on 127.0.0.1 (user postgres, trust), as Tests/test.sh starts; or DATABASE_URL
#             (its database part is replaced by BROWSER_DB). Neither: a throwaway cluster is started here.
#   BROWSER_DB=cosyncauth_browser   PYTHON (used when it has selenium and axe-selenium-python, else
#   .local/test-venv/bin/python, into which requirements.txt is installed when missing)   SCREENSHOT_DIR (/tmp)
# Needs the Debian packages apache2, libapache2-mod-auth-openidc, chromium, chromium-driver, openssl.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
HERE="$ROOT/Tests/system/oauth/browser"
cd "$ROOT"
# shellcheck source=../../../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"

BIN="${BIN:-$ROOT/.build/debug/cosyncauth}"
# The caller's Python when it has the browser packages, else the test venv (made by Tests/test.sh).
if [ -z "${PYTHON:-}" ] || ! "$PYTHON" -c "import selenium, axe_selenium_python" 2>/dev/null; then
  PYTHON="$ROOT/.local/test-venv/bin/python"
fi
BROWSER_DB="${BROWSER_DB:-cosyncauth_browser}"
[ -x "$BIN" ] || { echo "browser: no server binary at $BIN (run swift build first)" >&2; exit 2; }
missing=""
for tool in apache2 chromium chromedriver openssl setpriv; do command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"; done
[ -f /usr/lib/apache2/modules/mod_auth_openidc.so ] || missing="$missing mod_auth_openidc"
if [ -n "$missing" ]; then
  echo "browser: missing:$missing (apt-get install apache2 libapache2-mod-auth-openidc chromium chromium-driver)" >&2
  exit 2
fi
if ! "$PYTHON" -c "import selenium, axe_selenium_python" 2>/dev/null; then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check -r "$HERE/requirements.txt"
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/cosyncauth-browser.XXXXXX")"
chmod 755 "$WORK"
SERVER_PID=""
OWN_PG=""
cleanup() {
  # Apache is stopped by browser_login.py; its pid file is the safety net when Python was killed.
  if [ -f "$WORK/apache/httpd.pid" ]; then kill -TERM "$(cat "$WORK/apache/httpd.pid")" 2>/dev/null || true; fi
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  [ -z "$OWN_PG" ] || pg_stop "$WORK/pg/data" immediate || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# --- PostgreSQL: the caller's, or our own -----------------------------------------------------------------
if [ -z "${PGPORT:-}" ] && [ -z "${DATABASE_URL:-}" ]; then
  pg_install_if_missing
  pg_ensure_os_user
  mkdir -p "$WORK/pg"
  [ "$(id -u)" -ne 0 ] || chown "$PG_OS_USER": "$WORK/pg"
  PGPORT="$(pg_free_port 56532)"
  pg_init "$WORK/pg/data"
  pg_start "$WORK/pg/data" "$PGPORT" "$WORK/pg" "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  OWN_PG=1
fi
if [ -n "${PGPORT:-}" ]; then
  admin_url="postgres://postgres@127.0.0.1:$PGPORT/postgres?sslmode=disable"
  SERVER_DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/$BROWSER_DB?sslmode=disable"
else
  base="${DATABASE_URL%%\?*}"
  query=""
  [ "$base" = "$DATABASE_URL" ] || query="?${DATABASE_URL#*\?}"
  admin_url="${base%/*}/postgres$query"
  SERVER_DATABASE_URL="${base%/*}/$BROWSER_DB$query"
fi
PGOPTIONS="-c client_min_messages=warning" "$(pg_bin)/psql" "$admin_url" -qc "DROP DATABASE IF EXISTS \"$BROWSER_DB\"" \
  -c "CREATE DATABASE \"$BROWSER_DB\"" >/dev/null

# --- ports, the TLS certificate of auth.cosync.localhost ------------------------------------------------
SERVER_PORT="$(pg_free_port 18610)"
TLS_PORT="$(pg_free_port 18640)"
RP_TOTP_PORT="$(pg_free_port 18670)"
RP_PASSKEY_PORT="$(pg_free_port $((RP_TOTP_PORT + 1)))"
PUBLIC_URL="https://auth.cosync.localhost:$TLS_PORT"
mkdir -p "$WORK/apache"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=auth.cosync.localhost" \
  -addext "subjectAltName=DNS:auth.cosync.localhost" -addext "basicConstraints=critical,CA:FALSE" \
  -addext "extendedKeyUsage=serverAuth" -keyout "$WORK/apache/tls.key" -out "$WORK/apache/tls.crt" 2>/dev/null
SPKI="$(openssl x509 -in "$WORK/apache/tls.crt" -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64)"

# --- the server ---------------------------------------------------------------------------------------------
OPERATOR_TOKEN="cop_browser_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
LOG="$WORK/server.log"
DATABASE_URL="$SERVER_DATABASE_URL" COSYNC_MASTER_KEY="$(head -c 32 /dev/urandom | base64)" COSYNC_OPERATOR_TOKEN="$OPERATOR_TOKEN" \
  PORT="$SERVER_PORT" HOST=127.0.0.1 COSYNC_PUBLIC_URL="$PUBLIC_URL" COSYNC_BCRYPT_COST=4 LOG_LEVEL="${BROWSER_LOG_LEVEL:-warning}" \
  COSYNC_EMAIL_TRANSPORT=log COSYNC_SMS_TRANSPORT=log COSYNC_TRUSTED_PROXIES=127.0.0.1/32 COSYNC_METRICS_PORT=off \
  "$BIN" serve >"$LOG" 2>&1 &
SERVER_PID=$!
ready=""
for _ in $(seq 300); do
  kill -0 "$SERVER_PID" 2>/dev/null || break
  if curl -fsS -o /dev/null "http://127.0.0.1:$SERVER_PORT/healthz" 2>/dev/null; then ready=1; break; fi
  sleep 0.1
done
if [ -z "$ready" ]; then
  echo "browser: the server did not come up on 127.0.0.1:$SERVER_PORT" >&2
  tail -40 "$LOG" >&2
  exit 1
fi

status=0
"$PYTHON" "$HERE/browser_login.py" --server "http://127.0.0.1:$SERVER_PORT" --public-url "$PUBLIC_URL" \
  --operator-token "$OPERATOR_TOKEN" --work "$WORK/apache" --server-port "$SERVER_PORT" --tls-port "$TLS_PORT" \
  --rp-totp-port "$RP_TOTP_PORT" --rp-passkey-port "$RP_PASSKEY_PORT" --tls-cert "$WORK/apache/tls.crt" \
  --tls-key "$WORK/apache/tls.key" --spki "$SPKI" "$@" || status=$?
if ! kill -0 "$SERVER_PID" 2>/dev/null; then echo "browser: the server died during the run" >&2; status=1; fi
if [ "$status" -ne 0 ]; then
  echo "---- server log (last 40 lines) ----" >&2
  tail -40 "$LOG" >&2
fi
exit "$status"
