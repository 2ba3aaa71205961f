#!/usr/bin/env bash
# Benchmark of the CosyncJWT import: generates USERS legacy users across APPS apps (default 1,000,000
# and 100), imports them with a release build into a fresh database of the local cluster, and prints
# users/s and the importer's peak RSS.
#   tools/bench/import.sh [USERS] [APPS]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
USERS="${1:-1000000}"
APPS="${2:-100}"
# shellcheck source=../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"

VENV="$ROOT/.local/test-venv"
if ! "$VENV/bin/python" -c "import bcrypt, cryptography" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$ROOT/Tests/system/legacy/requirements.txt"
fi
echo "building (release)..." >&2
swift build -c release --product cosyncauth >&2
BIN="$(swift build -c release --show-bin-path)/cosyncauth"

DATA="$ROOT/.local/bench-import"
if [ ! -f "$DATA/fixture-$USERS-$APPS/users.json" ]; then
  rm -rf "$DATA" && mkdir -p "$DATA"
  echo "generating $USERS users in $APPS apps..." >&2
  "$VENV/bin/python" Tests/system/legacy/make_fixture.py "$DATA/fixture-$USERS-$APPS" --encrypt-key bench-key --seed 1 --apps "$APPS" --users "$USERS" >&2
fi
FIXTURE="$DATA/fixture-$USERS-$APPS"

URL="$(bash deploy/local-postgres.sh)"
DB="import_bench_$(date +%s)"
PGPORT="$(echo "$URL" | sed -E 's#.*:([0-9]+)/.*#\1#')"
pg_createdb "$PGPORT" "$DB"
export DATABASE_URL="${URL%/*}/$DB?sslmode=disable"
export COSYNC_MASTER_KEY="${COSYNC_MASTER_KEY:-$(cat "$ROOT/.local/secrets/master.key" 2>/dev/null || openssl rand -base64 32)}"
export LOG_LEVEL=warning

python3 - "$BIN" "$FIXTURE" "$USERS" <<'PY'
import resource, subprocess, sys, time
binary, fixture, users = sys.argv[1], sys.argv[2], int(sys.argv[3])
start = time.perf_counter()
proc = subprocess.run([binary, "import-legacy", fixture, "--encrypt-key", "bench-key", "--report", fixture + "/report.json"],
                      stdout=subprocess.PIPE, text=True)
elapsed = time.perf_counter() - start
print(proc.stdout)
if proc.returncode != 0:
    sys.exit(f"import failed with exit code {proc.returncode}")
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"imported {users} users in {elapsed:.1f} s = {users / elapsed:,.0f} users/s (whole run: apps, users, signups, invites, templates)")
print(f"importer peak RSS: {peak:.0f} MiB")
PY
