#!/usr/bin/env bash
# Traces the SQL of two requests on a real server (issue 21's closing note): a throwaway PostgreSQL with
# log_statement=all (jsonlog), two server nodes of BIN on one database, an app and a user made through
# the admin and end-user APIs, the app cache warmed on both nodes (one login on node 1, one
# getApplication on node 2). Then, each between two marks written to the PostgreSQL log:
#   (a) exactly one end-user login (POST /api/appuser/login, app-token, handle, md5 password, no 2FA)
#       on node 1;
#   (b) one PATCH /admin/v1/apps/{appId} of a setting on node 1, with GET /api/appuser/getApplication
#       polled on node 2 from before the PATCH until it serves the new value (node 2 dropped its cached
#       app on the LISTEN/NOTIFY message and loaded it again); it prints when node 2 last answered the
#       old value and first the new one, counted from the PATCH's sending.
# It prints, per request and per node and backend pid, the statements PostgreSQL logged between the
# marks, grouped into transactions (BEGIN..COMMIT/ROLLBACK on one backend is one transaction; a
# statement outside one is a transaction of its own), then the counts: transactions (explicit and
# single-statement) and statements (BEGIN/COMMIT/ROLLBACK not counted as statements, reported apart).
# Prepared statements are logged as `execute <name>: ...` and count like any other statement.
# Pool checkouts do not show in the log: a checkout that runs several statements without BEGIN shows as
# that many single-statement transactions on one backend (read the code for the checkouts).
#
# Background workers (outbox courier, webhook worker, limit housekeeping, database monitor, the app
# cache listener's ping) are filtered by recognition: an idle window of IDLE_SECONDS with no request
# is logged first, and a transaction of a request window is counted as background when the same
# sequence of statements (SQL text, parameters aside) ran in the idle window, or when it matches one
# of the known pollers' statements (BACKGROUND_RE below). Filtered transactions are listed too, so
# a reader can check the split.
#
#   BIN=.build/debug/cosyncauth tools/trace/requests.sh        (never builds)
#   Env: IDLE_SECONDS=8, SETTLE_SECONDS=1 (wait after a request before its closing mark, so work a
#   request leaves behind is caught), WIDTH=0 (cut each printed statement at WIDTH characters; 0 = whole),
#   PARAMS=1 prints each statement's parameters (PostgreSQL's DETAIL line) under it, LABEL=text is printed
#   in the header (say which commit BIN was built from), KEEP=1 keeps the work folder (the PostgreSQL
#   json log is $TMP/pglog/pg.json).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# The PostgreSQL helpers (deploy/lib/postgres.sh; looked for where the test tooling may move too).
PGLIB=""
for candidate in "$ROOT/deploy/lib/postgres.sh" "$ROOT/tools/lib/postgres.sh" "$ROOT/Tests/system/lib/postgres.sh"; do
  [ -f "$candidate" ] && { PGLIB="$candidate"; break; }
done
[ -n "$PGLIB" ] || { echo "postgres.sh helpers not found" >&2; exit 1; }
# shellcheck source=../../deploy/lib/postgres.sh
. "$PGLIB"

BIN="${BIN:-$ROOT/.build/debug/cosyncauth}"
IDLE_SECONDS="${IDLE_SECONDS:-8}"; SETTLE_SECONDS="${SETTLE_SECONDS:-1}"; WIDTH="${WIDTH:-0}"
[ -x "$BIN" ] || { echo "no executable at $BIN (build it first; this script never builds)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 1; }

pg_install_if_missing; pg_ensure_os_user
TMP="$(mktemp -d /tmp/cosync-trace.XXXXXX)"; chmod 755 "$TMP"
mkdir -p "$TMP/pglog"
if [ "$(id -u)" -eq 0 ]; then chown "$PG_OS_USER": "$TMP" "$TMP/pglog"; fi
NODE1_PID=""; NODE2_PID=""; PG_STARTED=""; POLLER=""
cleanup() {
  local pid
  for pid in "$POLLER" "$NODE1_PID" "$NODE2_PID"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
  [ -n "$PG_STARTED" ] && { pg_stop "$TMP/data" immediate || true; }
  if [ "${KEEP:-0}" = "1" ]; then echo "work folder kept: $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

# A copy of the binary, so a rebuild of the tree during the run changes nothing.
cp "$BIN" "$TMP/cosyncauth"
PGPORT="$(pg_free_port 57632)"
pg_init "$TMP/data"
pg_start "$TMP/data" "$PGPORT" "$TMP" "-c fsync=off -c log_statement=all -c log_min_duration_statement=-1 -c log_duration=off \
-c logging_collector=on -c log_destination=jsonlog -c log_directory=$TMP/pglog -c log_filename=pg.log -c log_rotation_size=0"
PG_STARTED=1
pg_createdb "$PGPORT" trace
PSQL="$(pg_bin)/psql"
PGLOG="$TMP/pglog/pg.json"

export DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/trace?sslmode=disable"
export COSYNC_MASTER_KEY="$(head -c 32 /dev/urandom | base64)"
export COSYNC_OPERATOR_TOKEN="cop_trace_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export COSYNC_BCRYPT_COST=4 COSYNC_METRICS_PORT=off LOG_LEVEL=warning HOST=127.0.0.1
unset COSYNC_SQL_DIR
PORT1="$(pg_free_port 18780)"; PORT2="$(pg_free_port $((PORT1 + 1)))"
N1="http://127.0.0.1:$PORT1"; N2="http://127.0.0.1:$PORT2"
# One node first (it runs the migrations), then the second.
PORT="$PORT1" "$TMP/cosyncauth" serve >"$TMP/node1.log" 2>&1 & NODE1_PID=$!
wait_ready() {
  for _ in $(seq 1 300); do curl -sf -o /dev/null "$1/readyz" && return 0; sleep 0.1; done
  echo "node $1 did not become ready:" >&2; tail -20 "$TMP"/node*.log >&2; return 1
}
wait_ready "$N1"
PORT="$PORT2" "$TMP/cosyncauth" serve >"$TMP/node2.log" 2>&1 & NODE2_PID=$!
wait_ready "$N2"

py() { python3 -c "$@"; }
field() { py 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
admin() { curl -sf -X "$1" "$2" -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN" -H 'Content-Type: application/json' ${3:+-d "$3"}; }
APP_JSON="$(admin POST "$N1/admin/v1/apps" '{"name":"Trace","signupFlow":"none"}')"
APP_ID="$(field appId <<<"$APP_JSON")"; TOKEN="$(field appToken <<<"$APP_JSON")"
HANDLE="trace-user@trace.test"; MD5="$(printf 'trace-password' | md5sum | cut -d' ' -f1)"
curl -sf -o /dev/null -X POST "$N1/api/appuser/signup" -H "app-token: $TOKEN" --data-binary "handle=$HANDLE&password=$MD5"
login() { curl -sf -X POST "$1/api/appuser/login" -H "app-token: $TOKEN" --data-binary "handle=$HANDLE&password=$MD5"; }
# passwordMinLength as node $1 serves it (grep, not python: the poll below should cost milliseconds).
min_length() { curl -sf "$1/api/appuser/getApplication" -H "app-token: $TOKEN" | grep -oE '"passwordMinLength" *: *[0-9]+' | grep -oE '[0-9]+$'; }

# Warm both nodes: node 1 through a login (app, token and signing key cached), node 2 through getApplication.
login "$N1" >/dev/null
login "$N1" >/dev/null
OLD_MIN="$(min_length "$N2")"; min_length "$N2" >/dev/null
NEW_MIN=$(( OLD_MIN == 12 ? 13 : 12 ))

# A mark: a statement of its own (application_name trace-mark) that the parser looks for.
mark() { PGAPPNAME=trace-mark "$PSQL" -h 127.0.0.1 -p "$PGPORT" -U postgres -qtAc "SELECT 'trace-mark $1'" trace >/dev/null; }

mark idle-begin; sleep "$IDLE_SECONDS"; mark idle-end

mark login-begin
LOGIN_STATUS="$(curl -s -o "$TMP/login.json" -w '%{http_code}' -X POST "$N1/api/appuser/login" -H "app-token: $TOKEN" --data-binary "handle=$HANDLE&password=$MD5")"
sleep "$SETTLE_SECONDS"; mark login-end
[ "$LOGIN_STATUS" = 200 ] || { echo "the login answered $LOGIN_STATUS: $(cat "$TMP/login.json")" >&2; exit 1; }

mark patch-begin
# Node 2 is polled from before the PATCH is sent until it serves the new value: the polls before the
# drop are cache hits (no SQL), the first one after it loads the app again.
POLLS="$TMP/polls"; : > "$POLLS"
( while [ ! -f "$TMP/stop-polling" ]; do
    v="$(min_length "$N2" || echo error)"; echo "$(date +%s.%N) $v" >> "$POLLS"
    [ "$v" = "$NEW_MIN" ] && break
    sleep 0.002
  done ) & POLLER=$!
sleep 0.2
T0="$(date +%s.%N)"
PATCH_STATUS="$(curl -s -o "$TMP/patch.json" -w '%{http_code}' -X PATCH "$N1/admin/v1/apps/$APP_ID" \
  -H "Authorization: Bearer $COSYNC_OPERATOR_TOKEN" -H 'Content-Type: application/json' -d "{\"passwordMinLength\": $NEW_MIN}")"
T1="$(date +%s.%N)"
for _ in $(seq 1 3000); do grep -q " $NEW_MIN\$" "$POLLS" && break; sleep 0.01; done
touch "$TMP/stop-polling"; wait "$POLLER" || true; POLLER=""
sleep "$SETTLE_SECONDS"; mark patch-end
[ "$PATCH_STATUS" = 200 ] || { echo "the PATCH answered $PATCH_STATUS: $(cat "$TMP/patch.json")" >&2; exit 1; }
grep -q " $NEW_MIN\$" "$POLLS" || { echo "node 2 never served passwordMinLength $NEW_MIN" >&2; exit 1; }

for _ in $(seq 1 100); do grep -q "trace-mark patch-end" "$PGLOG" 2>/dev/null && break; sleep 0.1; done

echo "== trace of $BIN"
echo "   binary $(stat -c '%s bytes, modified %y' "$BIN" | cut -d. -f1), sha256 $(sha256sum "$TMP/cosyncauth" | cut -c1-12)${LABEL:+; $LABEL}"
echo "   node 1: OS pid $NODE1_PID, port $PORT1; node 2: OS pid $NODE2_PID, port $PORT2; PostgreSQL $("$PSQL" -h 127.0.0.1 -p "$PGPORT" -U postgres -tAc 'SHOW server_version' trace)"
awk -v a="$T0" -v b="$T1" -v new="$NEW_MIN" '
  { n++; if ($2 == new) { if (!first) first = $1 } else if ($1 < a) before++; else { last_old = $1; old_after++ } }
  END { printf "   PATCH answered in %.0f ms; node 2 polled %d times (%d before the PATCH was sent); last old value %s; first new value %.0f ms after the PATCH was sent\n",
        (b-a)*1000, n, before, (last_old ? sprintf("%.0f ms after the PATCH was sent", (last_old-a)*1000) : "before the PATCH was sent"), (first-a)*1000 }' "$POLLS"
python3 - "$PGLOG" "$NODE1_PID" "$NODE2_PID" "$WIDTH" "${PARAMS:-0}" <<'PY'
import json, re, sys

path, node1, node2, width, params = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
# Statements of the known pollers (recognised even when the idle window missed them).
BACKGROUND_RE = re.compile(
    r"(^SELECT 1$)|(pg_stat_activity)|(\bmessages\b.*SKIP LOCKED)|(EPOCH FROM now\(\) - min\(created_at\))"
    r"|(webhook_deliveries\b.*SKIP LOCKED)|(DELETE FROM (events|login_attempts|throttle|login_challenges|webauthn_challenges)\b)",
    re.S | re.I)
TX_WORDS = {"BEGIN", "COMMIT", "ROLLBACK", "START TRANSACTION", "END"}

def node_of(app):
    if app.endswith(" monitor"):
        base = app[: -len(" monitor")]
        suffix = " (monitor connection)"
    else:
        base, suffix = app, ""
    pid = base.rsplit(" ", 1)[-1] if base.startswith("cosyncauth") else ""
    if pid == node1: return "node 1" + suffix
    if pid == node2: return "node 2" + suffix
    return (app or "?") + suffix

entries = []
with open(path) as f:
    for line in f:
        try: e = json.loads(line)
        except ValueError: continue
        msg = e.get("message", "")
        m = re.match(r"(statement|execute ([^:]*)): (.*)$", msg, re.S)
        if not m: continue
        sql = " ".join(m.group(3).split())
        entries.append({"pid": e.get("pid"), "node": node_of(e.get("application_name", "")), "sql": sql,
                        "prepared": m.group(2) not in (None, "<unnamed>"), "name": m.group(2), "detail": e.get("detail", "")})

def window(name):
    begin = end = None
    for i, e in enumerate(entries):
        if e["sql"] == f"SELECT 'trace-mark {name}-begin'": begin = i
        if e["sql"] == f"SELECT 'trace-mark {name}-end'": end = i
    if begin is None or end is None: sys.exit(f"marks for {name} not found in the log")
    return [e for e in entries[begin + 1 : end] if not e["sql"].startswith("SELECT 'trace-mark")]

def transactions(stmts):
    """Per backend pid: BEGIN..COMMIT/ROLLBACK is one transaction, a statement outside one its own."""
    open_tx, out = {}, []
    for e in stmts:
        word = e["sql"].rstrip(";").upper()
        pid = e["pid"]
        if word in ("BEGIN", "START TRANSACTION"):
            open_tx[pid] = {"pid": pid, "node": e["node"], "explicit": True, "stmts": [e]}
            out.append(open_tx[pid])
        elif pid in open_tx:
            open_tx[pid]["stmts"].append(e)
            if word in ("COMMIT", "ROLLBACK", "END"): del open_tx[pid]
        else:
            out.append({"pid": pid, "node": e["node"], "explicit": False, "stmts": [e]})
    return out

def body(tx): return [s for s in tx["stmts"] if s["sql"].rstrip(";").upper() not in TX_WORDS]
def signature(tx): return tuple(s["sql"] for s in body(tx))

idle = transactions(window("idle"))
idle_sigs = {signature(t) for t in idle}
def is_background(tx):
    sig = signature(tx)
    return sig in idle_sigs or (sig and all(BACKGROUND_RE.search(s) for s in sig))

def show(sql):
    return sql if width <= 0 or len(sql) <= width else sql[:width] + " ..."

print(f"\nidle window: {len(idle)} background transactions seen with no request "
      f"({len(idle_sigs)} distinct statement sequences; recognised as background below)")

def report(name, title, nodes_note):
    txs = transactions(window(name))
    fore = [t for t in txs if not is_background(t)]
    back = [t for t in txs if is_background(t)]
    print(f"\n==== {title}")
    if nodes_note: print(nodes_note)
    totals = {}
    for node in sorted({t["node"] for t in fore}):
        mine = [t for t in fore if t["node"] == node]
        stmts = [s for t in mine for s in body(t)]
        ctl = [s for t in mine for s in t["stmts"] if s["sql"].rstrip(";").upper() in TX_WORDS]
        explicit = sum(1 for t in mine if t["explicit"])
        prepared = sum(1 for s in stmts if s["prepared"])
        print(f"-- {node}: {len(mine)} transactions ({explicit} BEGIN..COMMIT, {len(mine) - explicit} single-statement), "
              f"{len(stmts)} statements ({prepared} of them named prepared statements), "
              f"{len(ctl)} BEGIN/COMMIT/ROLLBACK, backends {sorted({t['pid'] for t in mine})}")
        n = 0
        for i, t in enumerate(mine, 1):
            print(f"   transaction {i} (backend pid {t['pid']}{', BEGIN..COMMIT' if t['explicit'] else ', single statement'}):")
            for s in t["stmts"]:
                ctl_word = s["sql"].rstrip(";").upper() in TX_WORDS
                if not ctl_word: n += 1
                tag = "      " if ctl_word else f"   {n:2d}."
                name = f" [execute {s['name']}]" if s["prepared"] else ""
                print(f"   {tag} {show(s['sql'])}{name}")
                if params and s["detail"]: print(f"          ({show(s['detail'])})")
        totals[node] = (len(mine), explicit, len(stmts), len(ctl), prepared)
    if not fore: print("-- no statements besides the background")
    if back:
        kinds = {}
        for t in back: kinds[(t["node"], signature(t))] = kinds.get((t["node"], signature(t)), 0) + 1
        print(f"-- filtered as background: {len(back)} transactions")
        for (node, sig), count in sorted(kinds.items(), key=lambda kv: kv[0][0]):
            first = sig[0] if sig else "(BEGIN/COMMIT only)"
            print(f"     {count} x {node}: {show(first)[:140]}{' (+%d more statements)' % (len(sig) - 1) if len(sig) > 1 else ''}")
    return totals

a = report("login", "(a) one end-user login on node 1 (warm app cache, no 2FA)", "")
b = report("patch", "(b) PATCH /admin/v1/apps/{appId} on node 1, until node 2 serves the new setting",
           "   node 1 = the PATCH itself; node 2 = what node 2 ran after the NOTIFY dropped its cached app (its reload)")

print("\n==== summary (background excluded)")
print(f"{'request':<34} {'transactions':>12} {'(explicit)':>10} {'statements':>10} {'BEGIN/COMMIT':>12} {'prepared':>8}")
for label, totals in (("(a) login, node 1", a), ("(b) PATCH", b)):
    for node, (tx, ex, st, ctl, prep) in sorted(totals.items()):
        who = f"{label.split(',')[0]}, {node}" + (" (reload)" if label.startswith("(b)") and node == "node 2" else "")
        print(f"{who:<34} {tx:>12} {ex:>10} {st:>10} {ctl:>12} {prep:>8}")
PY
