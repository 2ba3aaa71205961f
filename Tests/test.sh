#!/usr/bin/env bash
# The README's "test" command: starts a throwaway PostgreSQL cluster, runs the whole test suite
# against it, and tears the cluster down even when tests fail.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"

pg_install_if_missing
build_deps_install_if_missing
pg_ensure_os_user
TMP="$(mktemp -d "${TMPDIR:-/tmp}/cosyncauth-test.XXXXXX")"
chmod 755 "$TMP"
[ "$(id -u)" -eq 0 ] && chown "$PG_OS_USER": "$TMP"
cleanup() { pg_stop "$TMP/data" immediate || true; rm -rf "$TMP"; }
trap cleanup EXIT

PORT="$(pg_free_port 56432)"
pg_init "$TMP/data"
pg_start "$TMP/data" "$PORT" "$TMP" "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
pg_createdb "$PORT" cosyncauth_test

export DATABASE_URL="postgres://postgres@127.0.0.1:$PORT/cosyncauth_test?sslmode=disable"
echo "test database: $DATABASE_URL" >&2

# The Python the tests run: zxing-cpp decodes the TOTP QR code, bcrypt and cryptography drive the
# legacy fixture generator (Tests/system/legacy/make_fixture.py), schemathesis fuzzes the admin API
# (Tests/system/fuzz/admin.sh), standardwebhooks verifies every webhook the tests receive (Tests/system/webhooks/receiver.py), fido2
# cross-checks the WebAuthn fixtures (Tests/system/webauthn/fido2_check.py); authlib, idpyoidc, jwcrypto, requests,
# selenium and axe-selenium-python drive the independent OAuth/OIDC clients (Tests/system/oauth/). A venv under .local/ (git-ignored), made once.
VENV="$ROOT/.local/test-venv"
if ! "$VENV/bin/python" -c "import zxingcpp, PIL, bcrypt, cryptography, schemathesis, standardwebhooks, fido2, authlib, idpyoidc, jwcrypto, requests, selenium, axe_selenium_python" 2>/dev/null; then
  if ! python3 -c "import ensurepip" 2>/dev/null && [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check zxing-cpp pillow schemathesis==4.32.5 hypothesis==6.170.15 standardwebhooks==1.1.0 fido2==2.2.1 \
    authlib==1.9.10 idpyoidc==5.0.0 jwcrypto==1.6.1 requests==2.34.2 -r "$ROOT/Tests/system/oauth/browser/requirements.txt" \
    -r "$ROOT/Tests/system/legacy/requirements.txt"
fi
export COSYNC_TEST_PYTHON="$VENV/bin/python"
export COSYNC_TEST_VENV="$VENV"

# The binary embeds sql/: the generated source must match it (tools/embed-migrations.sh).
bash "$ROOT/tools/embed-migrations.sh" --check
swift build --build-tests
# The fuzz step (Tests/system/fuzz/run.sh): the built server on a free port against its own database in this
# cluster, >= 100,000 hostile end-user requests, then the admin fuzzer. COSYNC_SKIP_FUZZ=1 skips it
# (for quick --filter runs while developing; CI always runs it).
if [ "${COSYNC_SKIP_FUZZ:-0}" != "1" ]; then
  BIN="$(swift build --show-bin-path)/cosyncauth" PGPORT="$PORT" PYTHON="$VENV/bin/python" PATH="$VENV/bin:$PATH" \
    bash "$ROOT/Tests/system/fuzz/run.sh"
fi
# The OAuth/OIDC stage (Tests/system/oauth/run.sh): independent clients (Authlib, idpyoidc, the OpenID Basic OP
# checks, the DPoP client, Apache mod_auth_openidc + Chromium) black-box against the built server on a free port.
# COSYNC_SKIP_OAUTH=1 skips it. A failure is reported after swift test, so a --filter run still shows its results.
# A stage reported late keeps its output in $STAGE_LOGS/<name>.log: when it fails, its last lines are printed again
# at the very end, where a CI summary (which keeps only the tail of the output) still shows why.
STAGE_LOGS="$TMP/stages"; mkdir -p "$STAGE_LOGS"
late_stage() {  # late_stage NAME COMMAND...: runs COMMAND, its output shown and kept; returns its status
  local name="$1"; shift
  local status
  # Always called as `late_stage … || X=$?`, so errexit is off here and PIPESTATUS holds the command's status.
  "$@" 2>&1 | tee "$STAGE_LOGS/$name.log"
  status=("${PIPESTATUS[@]}")
  return "${status[0]}"
}
stage_tail() {  # stage_tail NAME: the failed stage's last lines, once more
  echo "---- the last 60 lines of the $1 stage ----" >&2
  tail -60 "$STAGE_LOGS/$1.log" >&2 || true
  echo "----" >&2
}
OAUTH_STATUS=0
if [ "${COSYNC_SKIP_OAUTH:-0}" != "1" ]; then
  late_stage oauth env BIN="$(swift build --show-bin-path)/cosyncauth" PGPORT="$PORT" PYTHON="$VENV/bin/python" PATH="$VENV/bin:$PATH" \
    bash "$ROOT/Tests/system/oauth/run.sh" || OAUTH_STATUS=$?
fi
# The Portal stage (Tests/system/portal/run.sh, issue 23): Chromium through the Portal's pages on a live port (the
# walk, the refusals, axe-core on every page, screenshots into $COSYNC_ARTIFACTS or Tests/system/portal/artifacts,
# a fuzz of the forms). COSYNC_SKIP_PORTAL=1 skips it. A failure is reported after swift test, as the OAuth stage's.
PORTAL_STATUS=0
if [ "${COSYNC_SKIP_PORTAL:-0}" != "1" ]; then
  late_stage portal env BIN="$(swift build --show-bin-path)/cosyncauth" PGPORT="$PORT" PYTHON="$VENV/bin/python" PATH="$VENV/bin:$PATH" \
    bash "$ROOT/Tests/system/portal/run.sh" || PORTAL_STATUS=$?
fi
# Operations (issue 13): the container/manifest checks, the SIGTERM, backup/restore and trace tests,
# and the 3-node fault test (nginx in front; a node killed, PostgreSQL restarted). Each starts its own
# PostgreSQL cluster and servers. COSYNC_SKIP_OPS=1 skips them (quick --filter runs; CI runs them).
if [ "${COSYNC_SKIP_OPS:-0}" != "1" ]; then
  bash "$ROOT/Tests/system/validate/run.sh" --self-test
  BIN="$(swift build --show-bin-path)/cosyncauth" bash "$ROOT/Tests/system/ops/run.sh"
  BIN="$(swift build --show-bin-path)/cosyncauth" bash "$ROOT/Tests/system/multinode/run.sh"
fi
# The PostgreSQL failover stage (Tests/system/failover/run.sh, issue 24): etcd, two PostgreSQL under Patroni (a primary
# and a synchronous standby), HAProxy, 3 nodes behind nginx; the primary's postmaster SIGKILLed under load, then a
# switchover back. COSYNC_SKIP_FAILOVER=1 (or COSYNC_SKIP_OPS=1) skips it. A failure is reported after swift test.
FAILOVER_STATUS=0
if [ "${COSYNC_SKIP_FAILOVER:-0}" != "1" ] && [ "${COSYNC_SKIP_OPS:-0}" != "1" ]; then
  late_stage failover env BIN="$(swift build --show-bin-path)/cosyncauth" bash "$ROOT/Tests/system/failover/run.sh" || FAILOVER_STATUS=$?
fi
# At most 8 tests at once (COSYNC_TEST_WIDTH overrides). The suite is CPU-bound on a 2-core machine (every
# test creates apps, and each app an RSA-2048 key): with all ~290 tests started together, an app creation
# waited ~15 s for the key-generation threads and requests passed the test client's 20 s read timeout.
# Eight at once costs no wall time (the CPU is the limit either way) and keeps each request's wait short.
SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${COSYNC_TEST_WIDTH:-8}" swift test --skip-build --disable-xctest "$@"
if [ "$OAUTH_STATUS" -ne 0 ]; then
  stage_tail oauth
  echo "test: the OAuth stage failed (Tests/system/oauth/run.sh, above; COSYNC_SKIP_OAUTH=1 skips it)" >&2
  exit "$OAUTH_STATUS"
fi
if [ "$PORTAL_STATUS" -ne 0 ]; then
  stage_tail portal
  echo "test: the Portal stage failed (Tests/system/portal/run.sh, above; COSYNC_SKIP_PORTAL=1 skips it)" >&2
  exit "$PORTAL_STATUS"
fi
if [ "$FAILOVER_STATUS" -ne 0 ]; then
  stage_tail failover
  echo "test: the failover stage failed (Tests/system/failover/run.sh, above; COSYNC_SKIP_FAILOVER=1 skips it)" >&2
  exit "$FAILOVER_STATUS"
fi
