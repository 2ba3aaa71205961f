#!/usr/bin/env bash
# Every performance goal of issue 24 in one run, each figure next to its limit measured in the same run,
# ending with one table (figure, value, limit, ratio, goal, met/MISS):
#   tools/bench/login.sh   goals 1-6: /healthz and getUser against bare Hummingbird routes served by the same
#                          binary (`cosyncauth bench-bare`), login against the bcrypt ceiling and its p99/p50,
#                          fairness, 10,000 apps against one, app creation through the admin API;
#   tools/bench/idle.sh    goal 7: an idle node's database transactions per second, a queued e-mail's delay;
#   tools/bench/import.sh  goal 8: the legacy import against a raw COPY of the same rows, peak memory.
# One release build serves all three (in .build-release, git-ignored), unless BIN names a binary. Each script's
# own settings pass through (DURATION, CONNECTIONS, APPS, FAIR_SECONDS, WINDOW, ...; see their headers);
# IMPORT_USERS and IMPORT_APPS are import.sh's arguments. ONLY="login idle import" picks a subset.
# The machine must be otherwise idle: the figures share its cores with the server and PostgreSQL.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
. "$ROOT/tools/bench/release.sh"
bench_binary
export BIN
ONLY="${ONLY:-login idle import}"
BENCH_ROWS="$(mktemp /tmp/cosync-goals.XXXXXX)"; export BENCH_ROWS
trap 'rm -f "$BENCH_ROWS"' EXIT
status=0
for part in $ONLY; do
  echo "======== tools/bench/$part.sh"
  case "$part" in
    import) bash "$ROOT/tools/bench/import.sh" ${IMPORT_USERS:+"$IMPORT_USERS"} ${IMPORT_APPS:+"$IMPORT_APPS"} || status=$? ;;
    login|idle) bash "$ROOT/tools/bench/$part.sh" || status=$? ;;
    *) echo "unknown part: $part (login, idle, import)"; exit 2 ;;
  esac
done
echo
echo "======== issue 24 goals ($BIN)"
python3 "$ROOT/tools/bench/goal_table.py" "$BENCH_ROWS" 50
exit "$status"
