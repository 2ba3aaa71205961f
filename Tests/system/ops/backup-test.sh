#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2119,SC2001  # bash -c snippets take their values as arguments
# Backup and restore. A throwaway PostgreSQL; the server (.build/debug/cosyncauth or $BIN) makes an app
# with provider credentials (sealed with the master key) and a user; the user logs in. The server stops,
# `pg_dump -Fc` saves the database, `pg_restore` loads it into a new database, and a server on the
# restored database must log the same user in with the same app token and signing key. Then
# `cosyncauth doctor` on the restored database: exit 0 with the right master key, exit 1 with a FAIL
# line with another key, exit 2 without DATABASE_URL; and `migrate --dry-run` says up to date there,
# and lists 0001_initial on an empty database. Prints PASS/FAIL per step.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
START="$(date +%s.%N)"

ops_init backup
ops_start_pg original restored empty
ops_server_env original
RESTORED_URL="$(ops_db_url restored)"

# 1. The original database: an app with sealed provider credentials, a user, a login.
ops_start_server "$TMP/server-original.log"
CREDS='"TWILIOAccountSid":"AC0123456789abcdef0123456789abcdef","TWILIOToken":"twilio-token-0123456789","TWILIOPhoneNumber":"+15551234567","emailExtensionAPIKey":"SG.backup-test-key"'
ops_create_app "Backup" "$CREDS"
ops_check "original: app created with provider credentials (all 4 set)" \
  test "$(ops_json credentials <<<"$APP_JSON")" = '{"TWILIOAccountSid": true, "TWILIOPhoneNumber": true, "TWILIOToken": true, "emailExtensionAPIKey": true}'
ops_create_user "backup@example.com" "Backup-pass-1"
REPLY="$(ops_login backup@example.com Backup-pass-1)"
ops_check "original: user logs in (200 with jwt and access-token)" \
  test "$(ops_status_of "$REPLY")" = 200 -a -n "$(ops_body_of "$REPLY" | ops_json jwt)" -a -n "$(ops_body_of "$REPLY" | ops_json access-token)"
JWT="$(ops_body_of "$REPLY" | ops_json jwt)"
ops_check "original: user JWT verifies against the app's rawPublicKey" ops_verify_jwt "$JWT" "$RAW_PUBLIC_KEY"
ops_check "original: getApplication with the app token (200)" test "$(ops_status_of "$(ops_get_application)")" = 200
ops_stop_server
ops_check "original: server stops on SIGTERM with code 0 (code $SERVER_RC after ${SERVER_STOP_SECONDS} s)" test "$SERVER_RC" = 0

# 2. Dump and restore into another database.
DUMP="$TMP/original.dump"
if "$(pg_bin)/pg_dump" -h 127.0.0.1 -p "$PGPORT" -U postgres -Fc -f "$DUMP" original 2>"$TMP/pg_dump.err"; then
  ops_pass "pg_dump -Fc original ($(du -k "$DUMP" | cut -f1) KiB)"
else
  ops_fail "pg_dump -Fc original: $(cat "$TMP/pg_dump.err")"; exit 1
fi
if "$(pg_bin)/pg_restore" -h 127.0.0.1 -p "$PGPORT" -U postgres --exit-on-error --no-owner -d restored "$DUMP" 2>"$TMP/pg_restore.err"; then
  ops_pass "pg_restore into the database 'restored'"
else
  ops_fail "pg_restore: $(cat "$TMP/pg_restore.err")"; exit 1
fi
table_counts() {
  local db="$1" t
  for t in $(ops_psql "$db" "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"); do
    printf '%s=%s ' "$t" "$(ops_psql "$db" "SELECT count(*) FROM \"$t\"")"
  done
}
ORIG_COUNTS="$(table_counts original)"
ops_check "restored: same tables and row counts as the original ($(wc -w <<<"$ORIG_COUNTS") tables)" test "$ORIG_COUNTS" = "$(table_counts restored)"

# 3. migrate --dry-run: nothing to do on the restored database; everything on an empty one.
set +e
OUT="$(cd "$TMP" && DATABASE_URL="$RESTORED_URL" "$BIN" migrate --dry-run 2>&1)"; RC=$?
set -e
echo "$OUT" | sed 's/^/      migrate --dry-run (restored): /'
ops_check "restored: migrate --dry-run exits 0 and says up to date" \
  bash -c '[ "$1" = 0 ] && grep -qi "up to date" <<<"$2" && ! grep -qi "would apply" <<<"$2"' _ "$RC" "$OUT"
set +e
OUT="$(cd "$TMP" && DATABASE_URL="$(ops_db_url empty)" "$BIN" migrate --dry-run 2>&1)"; RC=$?
set -e
echo "$OUT" | sed 's/^/      migrate --dry-run (empty): /'
ops_check "empty database: migrate --dry-run exits 0 and lists 'would apply 0001_initial'" \
  bash -c '[ "$1" = 0 ] && grep -q "would apply 0001_initial" <<<"$2"' _ "$RC" "$OUT"
ops_check "empty database: the dry run changed nothing (no tables)" \
  test "$(ops_psql empty "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")" = 0

# 4. A server on the restored database, same master key: same user, app token and signing key.
export DATABASE_URL="$RESTORED_URL"
ops_start_server "$TMP/server-restored.log"
REPLY="$(ops_login backup@example.com Backup-pass-1)"
ops_check "restored: the user still logs in (200 with jwt)" \
  test "$(ops_status_of "$REPLY")" = 200 -a -n "$(ops_body_of "$REPLY" | ops_json jwt)"
JWT="$(ops_body_of "$REPLY" | ops_json jwt)"
ops_check "restored: the new JWT verifies against the original rawPublicKey" ops_verify_jwt "$JWT" "$RAW_PUBLIC_KEY"
REPLY="$(ops_login backup@example.com Wrong-pass-1)"
ops_check "restored: a wrong password is still refused (not 200)" test "$(ops_status_of "$REPLY")" != 200
REPLY="$(ops_get_application)"
ops_check "restored: the original app token still works (getApplication 200, name Backup)" \
  test "$(ops_status_of "$REPLY")" = 200 -a "$(ops_body_of "$REPLY" | ops_json name)" = Backup
APP_AFTER="$(ops_admin GET "/admin/v1/apps/$APP_ID")"
ops_check "restored: the app still has its 4 provider credentials" \
  test "$(ops_json credentials <<<"$APP_AFTER")" = '{"TWILIOAccountSid": true, "TWILIOPhoneNumber": true, "TWILIOToken": true, "emailExtensionAPIKey": true}'
ops_stop_server
ops_check "restored: server stops on SIGTERM with code 0 (code $SERVER_RC)" test "$SERVER_RC" = 0

# 5. doctor on the restored database.
run_doctor() {  # $1 = label; the environment decides the rest
  set +e
  DOCTOR_OUT="$(cd "$TMP" && timeout 60 "$BIN" doctor 2>&1)"; DOCTOR_RC=$?
  set -e
  echo "$DOCTOR_OUT" | sed "s/^/      doctor ($1): /"
  echo "      doctor ($1): exit code $DOCTOR_RC"
}
run_doctor "right key"
ops_check "doctor with the right master key: exit 0, 'ok' lines, no FAIL line" \
  bash -c '[ "$1" = 0 ] && grep -q "^ok" <<<"$2" && ! grep -q "^FAIL" <<<"$2"' _ "$DOCTOR_RC" "$DOCTOR_OUT"
ops_check "doctor: checks the schema version and the sealed values" \
  bash -c 'grep -qi "schema\|version\|migration" <<<"$1" && [ "$(grep -c "^ok" <<<"$1")" -ge 2 ]' _ "$DOCTOR_OUT"
RIGHT_KEY="$COSYNC_MASTER_KEY"
COSYNC_MASTER_KEY="$(head -c 32 /dev/urandom | base64)" run_doctor "random key"
ops_check "doctor with another master key: exit 1 with a FAIL line" \
  bash -c '[ "$1" = 1 ] && grep -q "^FAIL" <<<"$2"' _ "$DOCTOR_RC" "$DOCTOR_OUT"
ops_check "doctor output holds no secret (master keys, credentials, app token)" \
  bash -c 'for s in "$2" "$3" "$4" twilio-token-0123456789 SG.backup-test-key; do grep -qF -- "$s" <<<"$1" && exit 1; done; exit 0' \
  _ "$DOCTOR_OUT" "$RIGHT_KEY" "$COSYNC_MASTER_KEY" "$APP_TOKEN"
DATABASE_URL="" run_doctor "no DATABASE_URL"
ops_check "doctor without DATABASE_URL: exit 2 (configuration error)" test "$DOCTOR_RC" = 2

echo "backup test: $([ "$OPS_FAILED" -eq 0 ] && echo PASS || echo "FAIL ($OPS_FAILED steps)") in $(ops_elapsed "$START") s"
[ "$OPS_FAILED" -eq 0 ]
