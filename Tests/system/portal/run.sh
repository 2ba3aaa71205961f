#!/usr/bin/env bash
# The Portal stage of Tests/test.sh (issue 23): the built server on a live port, black-box, driven by Debian's
# Chromium through Selenium (walk.py: the operator's and developers' walk, the refusals, axe-core on every page,
# a screenshot of every page, a fuzz of the forms).
#
# Usage:
#   PGPORT=<a PostgreSQL on 127.0.0.1, user postgres, trust> bash Tests/system/portal/run.sh [walk.py options]
#   (or DATABASE_URL; with neither, a throwaway cluster is started here). In Tests/test.sh: COSYNC_SKIP_PORTAL=1
#   skips it. e.g. COSYNC_SKIP_FUZZ=1 COSYNC_SKIP_OPS=1 COSYNC_SKIP_OAUTH=1 bash Tests/test.sh --filter Portal
# Environment: BIN (default .build/debug/cosyncauth), PYTHON (used when it has selenium, axe-selenium-python
# and requests; else .local/test-venv/bin/python), PORTAL_DB (default cosyncauth_portal), COSYNC_ARTIFACTS
# (the screenshots; default Tests/system/portal/artifacts, git-ignored), PORTAL_LOG_LEVEL (default info).
#
# The public URL is http://localhost:<port> (the server listens on 127.0.0.1): the Portal's cookie is then `cosync-portal` without Secure (the
# http-on-loopback development setting), so Chromium needs no TLS front. The first operator's invite comes from
# `cosyncauth portal-operator --email …` (its output names /portal/invite/<code>); every later invite link is
# read from the members page (element invite-link), so no e-mail is needed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
HERE="$ROOT/Tests/system/portal"
cd "$ROOT"
# shellcheck source=../../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"
# shellcheck source=../lib/server.sh
. "$ROOT/Tests/system/lib/server.sh"

BIN="${BIN:-$ROOT/.build/debug/cosyncauth}"
if [ -z "${PYTHON:-}" ] || ! "$PYTHON" -c "import selenium, axe_selenium_python, requests" 2>/dev/null; then
  PYTHON="$ROOT/.local/test-venv/bin/python"
fi
PORTAL_DB="${PORTAL_DB:-cosyncauth_portal}"
ARTIFACTS="${COSYNC_ARTIFACTS:-$HERE/artifacts}"
[ -x "$BIN" ] || { echo "portal: no server binary at $BIN (run swift build first)" >&2; exit 2; }
missing=""
for tool in chromium chromedriver; do command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"; done
if [ -n "$missing" ]; then
  echo "portal: missing:$missing (apt-get install chromium chromium-driver)" >&2
  exit 2
fi
if ! "$PYTHON" -c "import selenium, axe_selenium_python, requests" 2>/dev/null; then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check -r "$ROOT/Tests/system/oauth/browser/requirements.txt" requests
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/cosyncauth-portal.XXXXXX")"
chmod 755 "$WORK"
LOG="$WORK/server.log"
trap 'server_cleanup; rm -rf "$WORK"' EXIT
print_log() { echo "---- server log (last 80 lines) ----" >&2; tail -80 "$LOG" >&2 || true; echo "----" >&2; }

server_database "$PORTAL_DB" "$WORK"
HTTP_PORT="$(pg_free_port "${PORTAL_HTTP_PORT:-18710}")"
# localhost, not 127.0.0.1: the Portal's passkey RP ID is the public URL's host, and WebAuthn takes no IP address.
BASE="http://localhost:$HTTP_PORT"
OPERATOR_TOKEN="cop_portal_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
MASTER_KEY="$(head -c 32 /dev/urandom | base64)"
OPERATOR_EMAIL="operator@portal.example.com"
SERVER_ENV=(COSYNC_MASTER_KEY="$MASTER_KEY" COSYNC_OPERATOR_TOKEN="$OPERATOR_TOKEN" COSYNC_PUBLIC_URL="$BASE"
  LOG_LEVEL="${PORTAL_LOG_LEVEL:-info}" COSYNC_WEBHOOK_ALLOW_HTTP=1 COSYNC_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8)
if ! server_start "$HTTP_PORT" "$LOG" "${SERVER_ENV[@]}"; then
  echo "portal: the server did not come up on $BASE" >&2
  exit 1
fi

# The first operator, as deploy/run.sh tells a new installation to make it: the command prints the invite link.
if ! env DATABASE_URL="$SERVER_DATABASE_URL" "${SERVER_ENV[@]}" "$BIN" portal-operator --email "$OPERATOR_EMAIL" \
  >"$WORK/operator.out" 2>&1; then
  echo "portal: cosyncauth portal-operator --email $OPERATOR_EMAIL failed:" >&2
  cat "$WORK/operator.out" >&2
  exit 1
fi
INVITE="$(grep -oE '/portal/invite/[A-Za-z0-9._~%-]+' "$WORK/operator.out" | head -1 || true)"
if [ -z "$INVITE" ]; then
  echo "portal: the output of cosyncauth portal-operator names no /portal/invite/<code> link:" >&2
  cat "$WORK/operator.out" >&2
  exit 1
fi

mkdir -p "$ARTIFACTS"
status=0
"$PYTHON" "$HERE/walk.py" --base "$BASE" --operator-email "$OPERATOR_EMAIL" --operator-invite "$BASE$INVITE" \
  --operator-token "$OPERATOR_TOKEN" --artifacts "$ARTIFACTS" "$@" || status=$?
if ! kill -0 "$SERVER_PID" 2>/dev/null; then
  echo "portal: the server died during the run" >&2
  status=1
fi
if [ "$status" -ne 0 ]; then
  print_log
  echo "portal: FAILED (screenshots and page sources: $ARTIFACTS)" >&2
fi
exit "$status"
