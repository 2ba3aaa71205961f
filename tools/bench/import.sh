#!/usr/bin/env bash
# Benchmark of the CosyncJWT import (issue 24, goal 8), against its physical limit measured in the
# same run.
#   tools/bench/import.sh [USERS] [APPS]        (defaults 200,000 and 100; BIN=path runs a given binary)
#
# 1. Generates two legacy datasets (Tests/system/legacy/make_fixture.py): USERS users and USERS/4, in
#    APPS apps, and imports each with a release build into a fresh database of the local cluster
#    (deploy/local-postgres.sh). Prints users/s of the whole run (apps, users, signups, invites,
#    templates, reset codes, the report) and of the users collection alone (the importer's summary),
#    and the importer's peak RSS.
# 2. Raw COPY: the users rows the large import wrote are copied out to a file (`\copy (SELECT * FROM
#    users) TO`) and timed going into an empty table of the same shape (`CREATE TABLE users_copy (LIKE
#    users INCLUDING ALL)`: the same columns, defaults, checks and indexes) with psql's `\copy FROM`,
#    the same row count over the same kind of client connection.
# 3. Goals: import users/s (whole run) >= 0.5 of the raw COPY's rows/s; peak RSS flat in the number of
#    users (peak at USERS <= 1.3 x peak at USERS/4).
#
# 200,000 users by default: the two imports and the raw COPY take about a minute on a 2-core machine
# (generating the datasets, once, about 30 s more); 1,000,000 takes about 5 times as long. KEEP_DB=1
# keeps the benchmark databases (otherwise they are dropped at the end).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
USERS="${1:-200000}"
APPS="${2:-100}"
SMALL=$((USERS / 4))
# shellcheck source=../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"

VENV="$ROOT/.local/test-venv"
if ! "$VENV/bin/python" -c "import bcrypt, cryptography" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$ROOT/Tests/system/legacy/requirements.txt"
fi
. "$ROOT/tools/bench/release.sh"
bench_binary

DATA="$ROOT/.local/bench-import"
mkdir -p "$DATA"
for n in "$SMALL" "$USERS"; do
  if [ ! -f "$DATA/fixture-$n-$APPS/users.json" ]; then
    rm -rf "$DATA/fixture-$n-$APPS"
    echo "generating $n users in $APPS apps..." >&2
    "$VENV/bin/python" Tests/system/legacy/make_fixture.py "$DATA/fixture-$n-$APPS" --encrypt-key bench-key --seed 1 \
      --apps "$APPS" --users "$n" >&2
  fi
done

URL="$(bash deploy/local-postgres.sh)"
PGPORT="$(echo "$URL" | sed -E 's#.*:([0-9]+)/.*#\1#')"
PSQL=("$(pg_bin)/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U postgres)
export COSYNC_MASTER_KEY="${COSYNC_MASTER_KEY:-$(cat "$ROOT/.local/secrets/master.key" 2>/dev/null || openssl rand -base64 32)}"
export LOG_LEVEL=warning
STAMP="$(date +%s)"
DBS=()
cleanup() {
  [ "${KEEP_DB:-0}" = 1 ] && return 0
  for db in "${DBS[@]}"; do "${PSQL[@]}" -c "DROP DATABASE IF EXISTS $db" postgres >/dev/null 2>&1 || true; done
  rm -f "$DATA/users.copy"
}
trap cleanup EXIT

# run_import N: imports the N-user dataset into its fresh database; prints "elapsed users_rate peak_kib".
run_import() {
  local n="$1" db="import_bench_${STAMP}_$1"
  DATABASE_URL="${URL%/*}/$db?sslmode=disable" python3 - "$BIN" "$DATA/fixture-$n-$APPS" <<'PY'
import os, subprocess, sys, time
binary, fixture = sys.argv[1], sys.argv[2]
start = time.perf_counter()
proc = subprocess.Popen([binary, "import-legacy", fixture, "--encrypt-key", "bench-key", "--report", fixture + "/report.json"],
                        stdout=subprocess.PIPE, text=True)
out = proc.stdout.read()
_, status, usage = os.wait4(proc.pid, 0)
elapsed = time.perf_counter() - start
print(out, file=sys.stderr)
if status != 0:
    sys.exit(f"import failed (wait status {status})")
rate = next((line.split()[-1] for line in out.splitlines() if line.startswith("users ")), "0")
print(f"{elapsed:.3f} {rate} {usage.ru_maxrss}")
PY
}

for n in "$SMALL" "$USERS"; do
  pg_createdb "$PGPORT" "import_bench_${STAMP}_$n"
  DBS+=("import_bench_${STAMP}_$n")
done
echo "importing $SMALL users..." >&2
read -r SMALL_SECONDS SMALL_RATE SMALL_PEAK < <(run_import "$SMALL")
echo "importing $USERS users..." >&2
read -r BIG_SECONDS USERS_RATE PEAK < <(run_import "$USERS")
DB="import_bench_${STAMP}_$USERS"

echo "raw COPY of the same users rows..." >&2
rm -f "$DATA/users.copy"
"${PSQL[@]}" -d "$DB" -c "\\copy (SELECT * FROM users) TO '$DATA/users.copy'"
ROWS="$("${PSQL[@]}" -d "$DB" -tAc "SELECT count(*) FROM users")"
"${PSQL[@]}" -d "$DB" -c "CREATE TABLE users_copy (LIKE users INCLUDING ALL)" -c "CHECKPOINT"
T0="$(date +%s.%N)"
"${PSQL[@]}" -d "$DB" -c "\\copy users_copy FROM '$DATA/users.copy'"
T1="$(date +%s.%N)"
COPIED="$("${PSQL[@]}" -d "$DB" -tAc "SELECT count(*) FROM users_copy")"

python3 - "$USERS" "$SMALL" "$ROWS" "$COPIED" "$BIG_SECONDS" "$USERS_RATE" "$PEAK" "$SMALL_SECONDS" "$SMALL_RATE" "$SMALL_PEAK" "$T0" "$T1" <<'PY'
import sys
users, small, rows, copied = (int(x) for x in sys.argv[1:5])
seconds, users_rate, peak = float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7]) / 1024
small_seconds, small_rate, small_peak = float(sys.argv[8]), float(sys.argv[9]), int(sys.argv[10]) / 1024
copy_seconds = float(sys.argv[12]) - float(sys.argv[11])
if copied != rows:
    sys.exit(f"the raw COPY wrote {copied} rows, not {rows}")
whole = rows / seconds
copy_rate = rows / copy_seconds
ratio = whole / copy_rate
users_ratio = users_rate / copy_rate
rss_ratio = peak / small_peak
def met(ok): return "met" if ok else "MISS"
print(f"import of {users:,} users ({rows:,} user rows, {seconds:.1f} s): {whole:,.0f} users/s whole run, "
      f"{users_rate:,.0f} rows/s users collection alone")
print(f"import of {small:,} users ({small_seconds:.1f} s): {small_rate:,.0f} rows/s users collection")
print(f"raw COPY of the same {rows:,} rows into users_copy (same columns and indexes): {copy_seconds:.2f} s = {copy_rate:,.0f} rows/s")
print(f"peak RSS: {small_peak:.0f} MiB at {small:,} users, {peak:.0f} MiB at {users:,} users")
print()
print(f"{'figure':<44}{'value':>12}{'limit':>12}{'ratio':>8}{'goal':>9}  result")
print(f"{'import users/s (whole run) vs raw COPY':<44}{whole:>12,.0f}{copy_rate:>12,.0f}{ratio:>8.2f}{'>= 0.5':>9}  {met(ratio >= 0.5)}")
print(f"{'  users collection alone vs raw COPY':<44}{users_rate:>12,.0f}{copy_rate:>12,.0f}{users_ratio:>8.2f}{'':>9}  (information)")
print(f"{'peak RSS MiB, users x4':<44}{peak:>12.0f}{small_peak:>12.0f}{rss_ratio:>8.2f}{'<= 1.3':>9}  {met(rss_ratio <= 1.3)}")
# tools/bench/goals.sh gathers the rows of every issue-24 benchmark into one table (name|value|limit|unit|op|goal).
import os
if os.environ.get("BENCH_ROWS"):
    with open(os.environ["BENCH_ROWS"], "a") as out:
        out.write(f"legacy import users/s vs raw COPY rows/s|{whole:.1f}|{copy_rate:.1f}|/s|ge|0.5\n")
        out.write(f"legacy import peak RSS, {users:,} users vs {small:,}|{peak:.1f}|{small_peak:.1f}|MiB|le|1.3\n")
PY
