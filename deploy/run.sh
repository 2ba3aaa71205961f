#!/usr/bin/env bash
# The README's "run" command: install what is missing, build, start the private PostgreSQL cluster
# under .local/, apply migrations, print the URL and the operator token, and serve.
# Run it again and it reuses the cluster, its data, the master key and the operator token.
#   PORT=8080 (default)   BUILD=debug|release (default debug: a faster first build)
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
cat <<INFO

  CosyncAuth is starting on http://localhost:$PORT
  metrics:         http://127.0.0.1:${COSYNC_METRICS_PORT:-9464}/metrics (this machine only)
  database:        $DATABASE_URL
  operator token:  $COSYNC_OPERATOR_TOKEN

  try: curl -s -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN" http://localhost:$PORT/admin/v1/apps

INFO
exec "$BIN" serve
