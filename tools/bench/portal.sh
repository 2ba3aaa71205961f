#!/usr/bin/env bash
# The Portal's server time per page with 1 app and with 10,000 apps (issue 23: "it must stay fast with
# 10,000 apps"), on a throwaway local PostgreSQL.
#
# Pages: the apps list (first page, a name search that matches, a search that matches nothing, a later
# page through its cursor), the operator's tenants view (first page and a later page), one app's
# overview, its users page. Each is fetched N times (default 21) with curl on loopback by a signed-in
# operator; the figure is the median of curl's time_starttransfer - time_pretransfer (request sent to
# first byte back: the server's time), in ms. Printed as a table: page, 1 app, APPS apps.
#
# How the apps are made (fast on purpose, and not the way the product makes them):
#   - one real app is created through the admin API (POST /admin/v1/apps: RSA key, token, secret), with
#     USERS users inserted by SQL (no password: the pages only list them);
#   - the other APPS-1 apps are INSERTed by SQL as copies of that app's row (same settings and product,
#     a new random app_id, name "Bench tenant NNNNN", a random app_secret_hash), each with
#     USERS_PER_APP users and a live session for the first of them, also by SQL. They have no token or
#     key rows: the Portal's list pages never read those, and the app pages are measured on the real app.
#     Creating 10,000 apps through the API would take an RSA key generation each (minutes).
#   - the operator's Portal account and its session are INSERTed by SQL too (the cookie is a random
#     value; the row holds its SHA-256, as the Portal stores it), instead of the invite, password and
#     TOTP ceremony.
#
#   BIN=.build/release/cosyncauth (default: .build/release if built, else .build/debug, flagged)
#   APPS=10000 N=21 USERS=1000 USERS_PER_APP=10 tools/bench/portal.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
# shellcheck source=../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"
APPS="${APPS:-10000}"; N="${N:-21}"; USERS="${USERS:-1000}"; USERS_PER_APP="${USERS_PER_APP:-10}"
if [ -z "${BIN:-}" ]; then
  if [ -x .build/release/cosyncauth ]; then BIN=.build/release/cosyncauth; else BIN=.build/debug/cosyncauth; fi
fi
[ -x "$BIN" ] || { echo "no executable at $BIN (swift build -c release --product cosyncauth)"; exit 1; }
KIND="$BIN"; case "$BIN" in *debug*) KIND="$BIN (DEBUG build: absolute figures are several times a release build's)";; esac
command -v curl >/dev/null || { echo "curl is needed"; exit 1; }

pg_install_if_missing; pg_ensure_os_user
TMP="$(mktemp -d /tmp/cosync-portal-bench.XXXXXX)"; chmod 755 "$TMP"; [ "$(id -u)" -eq 0 ] && chown "$PG_OS_USER": "$TMP"
SERVER_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; pg_stop "$TMP/data" immediate || true; rm -rf "$TMP"; }
trap cleanup EXIT
PGPORT="$(pg_free_port 59532)"
pg_init "$TMP/data"; pg_start "$TMP/data" "$PGPORT" "$TMP"; pg_createdb "$PGPORT" bench
HTTP_PORT="$(pg_free_port 18680)"; H="http://127.0.0.1:$HTTP_PORT"
METRICS_PORT="$(pg_free_port $((HTTP_PORT + 1)))"
export DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/bench?sslmode=disable" PORT="$HTTP_PORT" COSYNC_METRICS_PORT="$METRICS_PORT"
export COSYNC_MASTER_KEY="$(head -c 32 /dev/urandom | base64)" COSYNC_OPERATOR_TOKEN="cop_bench_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# http on a loopback host: the Portal's cookie is `cosync-portal` (no Secure, no __Host- prefix).
export COSYNC_PUBLIC_URL="$H" LOG_LEVEL=warning
PSQL() { "$(pg_bin)/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U postgres -d bench "$@"; }

"$BIN" serve >"$TMP/server.log" 2>&1 & SERVER_PID=$!
for _ in $(seq 1 300); do curl -sf "$H/healthz" >/dev/null && break; sleep 0.1; done
curl -sf "$H/healthz" >/dev/null || { echo "the server did not start:"; tail -20 "$TMP/server.log"; exit 1; }

# The real app, through the admin API.
APP_ID="$(curl -sf -X POST "$H/admin/v1/apps" -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN" -H 'Content-Type: application/json' \
  -d '{"name":"Bench real app"}' | sed -nE 's/.*"appId" *: *"([0-9a-f]{32})".*/\1/p')"
[ -n "$APP_ID" ] || { echo "could not create the app"; exit 1; }
# Its users (by SQL; no password).
PSQL -v app="$APP_ID" -v n="$USERS" <<'SQL'
INSERT INTO users (app_ref, handle, last_login)
SELECT a.id, 'user' || lpad(g::text, 7, '0') || '@bench.example', now() - g * interval '1 minute'
FROM apps a, generate_series(1, :n) g WHERE a.app_id = :'app';
SQL
# The operator and its session (by SQL: see the header).
COOKIE="$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
PSQL -v cookie="$COOKIE" <<'SQL'
WITH account AS (
    INSERT INTO portal_accounts (email, is_operator, totp_enabled) VALUES ('bench-operator@portal.example', true, true) RETURNING id)
INSERT INTO portal_sessions (account_id, secret_hash, proven_by)
SELECT id, sha256(convert_to(:'cookie', 'UTF8')), 'bench' FROM account;
SQL

# ms (server time) of one GET, repeated N times: the median.
measure() {
  local path="$1" out=()
  for _ in $(seq 1 "$N"); do
    out+=("$(curl -s -o "$TMP/page.html" -w '%{http_code} %{time_pretransfer} %{time_starttransfer}' -H "Cookie: cosync-portal=$COOKIE" "$H$path")")
  done
  printf '%s\n' "${out[@]}" | python3 -c '
import sys, statistics
rows = [line.split() for line in sys.stdin if line.strip()]
bad = [r[0] for r in rows if r[0] != "200"]
ms = [(float(r[2]) - float(r[1])) * 1000 for r in rows]
print(("%.1f" % statistics.median(ms)) + (" (HTTP %s)" % ",".join(sorted(set(bad))) if bad else ""))'
}
# The path of the page's "next page" link (the cursor of page 1), or "".
next_link() { curl -s -H "Cookie: cosync-portal=$COOKIE" "$H$1" | sed -nE 's/.*id="next-page" href="([^"]*)".*/\1/p' | sed 's/&amp;/\&/g' | head -1; }

pages() {
  local later_apps later_tenants
  later_apps="$(next_link /portal)"; later_tenants="$(next_link /portal/tenants)"
  # A later page: four pages on (the cursor of page 1 minus 150 ids).
  if [ -n "$later_apps" ]; then
    local c; c="$(echo "$later_apps" | sed -nE 's/.*cursor=([0-9]+).*/\1/p')"
    later_apps="/portal?cursor=$((c - 150))"; later_tenants="/portal/tenants?cursor=$((c - 150))"
  else
    later_apps="/portal?cursor=1"; later_tenants="/portal/tenants?cursor=1"
  fi
  echo "apps list, first page|$(measure /portal)"
  echo "apps list, search 'Bench'|$(measure '/portal?q=Bench')"
  echo "apps list, search that matches nothing|$(measure '/portal?q=zzz-nothing')"
  echo "apps list, a later page (cursor)|$(measure "$later_apps")"
  echo "tenants, first page|$(measure /portal/tenants)"
  echo "tenants, a later page (cursor)|$(measure "$later_tenants")"
  echo "tenants, search 'Bench tenant 05'|$(measure '/portal/tenants?q=Bench%20tenant%2005')"
  echo "app overview|$(measure "/portal/apps/$APP_ID")"
  echo "app users page|$(measure "/portal/apps/$APP_ID/users")"
}

echo "== 1 app" >&2
pages > "$TMP/one.txt"
cat "$TMP/one.txt" >&2

echo "== inserting $((APPS - 1)) apps by SQL (copies of the real app's row), $USERS_PER_APP users and a session each" >&2
started=$(date +%s.%N)
PSQL -v app="$APP_ID" -v n="$((APPS - 1))" -v per="$USERS_PER_APP" <<'SQL'
CREATE TEMP TABLE copies AS
SELECT g, md5(random()::text || clock_timestamp()::text || g) AS app_id FROM generate_series(1, :n) g;
INSERT INTO apps (app_id, name, status, settings, app_secret_hash, created_at, updated_at, product)
SELECT c.app_id, 'Bench tenant ' || lpad(c.g::text, 5, '0'), a.status, a.settings,
       sha256(convert_to(c.app_id || random()::text, 'UTF8')), now(), now(), a.product
FROM copies c, apps a WHERE a.app_id = :'app' ORDER BY c.g;
INSERT INTO users (app_ref, handle, last_login)
SELECT a.id, 'user' || u || '@bench.example', CASE WHEN u = 1 THEN now() - interval '1 hour' END
FROM apps a JOIN copies c ON c.app_id = a.app_id, generate_series(1, :per) u;
INSERT INTO sessions (app_ref, user_id, method, expires_at)
SELECT u.app_ref, u.id, 'password', now() + interval '1 day'
FROM users u JOIN apps a ON a.id = u.app_ref JOIN copies c ON c.app_id = a.app_id WHERE u.handle = 'user1@bench.example';
ANALYZE;
SQL
echo "   $(python3 -c "print(round($(date +%s.%N) - $started, 1))") s; apps: $(PSQL -tAc 'SELECT count(*) FROM apps'), users: $(PSQL -tAc 'SELECT count(*) FROM users')" >&2

echo "== $APPS apps" >&2
pages > "$TMP/many.txt"

echo
echo "Portal server time per page (ms, median of $N; curl time to first byte on loopback) — $KIND"
python3 - "$TMP/one.txt" "$TMP/many.txt" "$APPS" <<'PY'
import sys
one = dict(line.rstrip("\n").split("|", 1) for line in open(sys.argv[1]))
many = dict(line.rstrip("\n").split("|", 1) for line in open(sys.argv[2]))
width = max(len(k) for k in one)
print(f"{'page':<{width}}  {'1 app':>10}  {sys.argv[3] + ' apps':>12}")
for key in one:
    print(f"{key:<{width}}  {one[key]:>10}  {many.get(key, '?'):>12}")
PY

# The statements behind the pages, with 10,000 apps: PostgreSQL's own execution time (EXPLAIN ANALYZE).
echo
echo "PostgreSQL execution time of the statements behind the pages ($APPS apps; EXPLAIN ANALYZE):"
explain() { printf '  %-58s %s\n' "$1" "$(PSQL -tA -c "EXPLAIN (ANALYZE, FORMAT TEXT) $2" | sed -nE 's/^Execution Time: (.*)/\1/p')"; }
explain "apps list, first page (50 + 1 rows)" "SELECT id FROM apps WHERE id < 9223372036854775807 ORDER BY id DESC LIMIT 51"
explain "apps list, search that matches nothing" "SELECT id FROM apps WHERE id < 9223372036854775807 AND (lower(name) LIKE 'zzz%' OR app_id LIKE 'zzz%') ORDER BY id DESC LIMIT 51"
explain "tenants figures of one page (50 apps)" "SELECT a.app_id, (SELECT count(*) FROM users u WHERE u.app_ref = a.id), (SELECT count(*) FROM sessions s WHERE s.app_ref = a.id AND s.expires_at > now()), (SELECT max(u.last_login) FROM users u WHERE u.app_ref = a.id AND u.last_login IS NOT NULL), (SELECT count(*) FROM events e WHERE e.app_ref = a.id AND e.created_at > now() - interval '7 days') FROM apps a WHERE a.app_id = ANY(ARRAY(SELECT app_id FROM apps ORDER BY id DESC LIMIT 50))"
