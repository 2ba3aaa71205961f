#!/usr/bin/env bash
# The README's "run" command: install what is missing, build, start the private PostgreSQL cluster
# under .local/, apply migrations, print the URL and the operator token, and serve.
# Run it again and it reuses the cluster, its data, the master key and the operator token.
#   PORT=8080 (default)   BUILD=debug|release (default debug: a faster first build)
#   PORTAL_OPERATOR_EMAIL=you@example.com: also print a one-time link that makes (or recovers) that
#   Portal operator account (`cosyncauth portal-operator`)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PORT="${PORT:-8080}"
BUILD="${BUILD:-debug}"

command -v swift >/dev/null || { echo "swift is not on PATH (Swift 6.1 or newer is needed)" >&2; exit 1; }
# shellcheck source=lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"
build_deps_install_if_missing

DATABASE_URL="$(deploy/local-postgres.sh start)"
export DATABASE_URL

# Secrets made once and kept under .local/secrets (git-ignored, mode 700): the master key that seals
# secrets at rest, and the operator token. (.local itself must stay traversable: the PostgreSQL
# cluster under .local/pg belongs to the postgres OS user.)
SECRETS=.local/secrets
mkdir -p "$SECRETS" && chmod 700 "$SECRETS"
[ -s "$SECRETS/master.key" ] || (umask 077; head -c 32 /dev/urandom | base64 > "$SECRETS/master.key")
[ -s "$SECRETS/operator-token" ] || (umask 077; echo "cop_$(head -c 32 /dev/urandom | base64 | tr -d '=+/' )" > "$SECRETS/operator-token")
export COSYNC_MASTER_KEY="$(cat "$SECRETS/master.key")"
export COSYNC_OPERATOR_TOKEN="$(cat "$SECRETS/operator-token")"
export PORT

echo "building ($BUILD)..." >&2
swift build -c "$BUILD" --product cosyncauth >&2
BIN="$(swift build -c "$BUILD" --show-bin-path)/cosyncauth"

"$BIN" migrate
PUBLIC_URL="${COSYNC_PUBLIC_URL:-http://localhost:$PORT}"
PUBLIC_URL="${PUBLIC_URL%/}"
# The Portal's first operator: with PORTAL_OPERATOR_EMAIL set, make (or re-make) its one-time invite
# link now; otherwise say how to.
if [ -n "${PORTAL_OPERATOR_EMAIL:-}" ]; then
  LINK="$("$BIN" portal-operator --email "$PORTAL_OPERATOR_EMAIL")"
  PORTAL_SIGN_IN="open this one-time link to set the operator's password and enrol an authenticator app:
                   $LINK"
else
  PORTAL_SIGN_IN="first operator: run  PORTAL_OPERATOR_EMAIL=you@example.com deploy/run.sh
                   (or, with this script's DATABASE_URL and COSYNC_MASTER_KEY set:
                   $BIN portal-operator --email you@example.com)
                   and open the one-time link it prints: it sets the password and enrols an
                   authenticator app (TOTP); then sign in at the Portal with e-mail, password and code"
fi
cat <<INFO

  CosyncAuth is starting on http://localhost:$PORT
  Portal:          $PUBLIC_URL/portal
                   $PORTAL_SIGN_IN
  metrics:         http://127.0.0.1:${COSYNC_METRICS_PORT:-9464}/metrics (this machine only)
  database:        $DATABASE_URL
  operator token:  $COSYNC_OPERATOR_TOKEN

  try: curl -s -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN" http://localhost:$PORT/admin/v1/apps

INFO
exec "$BIN" serve
