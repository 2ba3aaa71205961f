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
if [ -z "${BIN:-}" ]; then
  echo "building release (.build-release)..." >&2
  swift build -c release --product cosyncauth --scratch-path "$ROOT/.build-release" >&2
  BIN="$ROOT/.build-release/release/cosyncauth"
fi
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
python3 - "$BENCH_ROWS" <<'PY'
import sys
rows = [l.rstrip("\n").split("|") for l in open(sys.argv[1]) if l.strip()]
ops = {"ge": (">=", lambda r, g: r >= g), "le": ("<=", lambda r, g: r <= g), "lt": ("<", lambda r, g: r < g)}
def num(text):
    try:
        return float(text)
    except ValueError:
        return float("nan")
def show(v, unit):
    return (f"{v:.2f}" if unit in ("ms", "us/req", "", "MiB") else f"{v:.1f}") + (f" {unit}" if unit else "")
print(f"{'figure':<50} {'value':>16} {'limit':>16} {'ratio':>7}  {'goal':<7} result")
missed = 0
for name, value, limit, unit, op, goal in rows:
    v, l = num(value), num(limit)
    ratio = v / l if l else float("nan")
    if op == "info":
        goal_text, result = "-", "-"
    else:
        sym, test = ops[op]
        goal_text = f"{sym} {goal}"
        ok = ratio == ratio and test(ratio, float(goal))
        result = "met" if ok else "MISS"
        missed += 0 if ok else 1
    print(f"{name:<50} {show(v, unit):>16} {show(l, unit):>16} {ratio:>7.2f}  {goal_text:<7} {result}")
print(f"{missed} goal(s) missed")
PY
exit "$status"
