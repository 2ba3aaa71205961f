#!/usr/bin/env bash
# OAuth benchmark (issue 22) against a release build on a throwaway local PostgreSQL. Every figure is
# printed next to its physical limit measured in the same run: raw RSA-2048 PKCS#1 v1.5 SHA-256
# signatures per second (`cosyncauth bench-token`, one worker per core, the server's own number of
# event-loop threads), measured before the server starts and again after the load (the best reading,
# raw or through the user-JWT issuer, is the limit), and raw P-256 verifies per second (`cosyncauth
# bench-passkey`) where a request verifies one.
#   1. refresh_token grants/s        next to  RSA signs/s ÷ 2: one refresh signs the access token (RS256,
#                                              at+jwt) and, with scope openid, an ID token. Also next to
#                                              the anchor: Keycloak publishes 120 refreshes/s per vCPU.
#      Families: FAMILIES users, each signed in (end-user API) and turned into a refresh family by RFC 8693
#      token exchange; wrk, one thread per connection, walks them (each answer's refresh_token is the next
#      request's), CONNECTIONS connections.
#   2. DPoP-bound refreshes/s        next to  1 ÷ (2 ÷ RSA signs/s + 1 ÷ P-256 verifies/s) (DPOP=0 skips)
#   3. authorization-code flows/s    next to  1 ÷ (4 ÷ RSA signs/s + 1 ÷ P-256 verifies/s): an AppKey app's
#      with a passkey (no bcrypt)              user signs in on the hosted page with its passkey: GET
#                                              /oauth/authorize (PKCE) -> the page -> passkey options ->
#                                              finish (ES256 assertion) -> resume -> code -> token. Signs: the
#                                              AppKey sign-in's session access token (server key) and user
#                                              JWT (app key), then the access and ID tokens.
# Each load runs DURATION seconds. For each window it prints the CPU of the server, PostgreSQL, the load
# generator and the rest of the machine (other processes), the idle share and the load average, so that
# a busy machine, an unsaturated server or a saturated client shows; the load generator's CPU per
# operation (what one core of it could drive); PostgreSQL's statements per operation and the costliest
# (pg_stat_statements on the throwaway cluster); for the flows, the mean time of each step. Ends with a
# table: figure, value, limit, ratio, goal, met/MISS. Goals: at least half of the ceiling (the HTTP,
# protocol and PostgreSQL work around the signatures costs no more than the signatures), and the anchor.
# On a shared machine both the rates and the ceilings move with the other load, so the table also gives
# each figure per CPU-second of the server and PostgreSQL next to the signatures' own CPU cost (CPU time
# of bench-token and bench-passkey per operation): the ratio the machine would give them alone.
# Needs wrk (installed with apt-get when missing, as root) and python3 with `cryptography`.
#   BIN=.build/debug/cosyncauth (default: builds release)  DURATION=20 CONNECTIONS=16 FAMILIES=64
#   USERS=64 TOKEN_SECONDS=5 DPOP=1 tools/bench/oauth.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
# shellcheck source=../../deploy/lib/postgres.sh
. "$ROOT/deploy/lib/postgres.sh"
DURATION="${DURATION:-20}"; CONNECTIONS="${CONNECTIONS:-16}"; FAMILIES="${FAMILIES:-64}"; USERS="${USERS:-64}"
TOKEN_SECONDS="${TOKEN_SECONDS:-5}"; DPOP="${DPOP:-1}"
KEYCLOAK_PER_VCPU=120
REFRESH_SIGNS=2; FLOW_SIGNS=4

command -v wrk >/dev/null || { [ "$(id -u)" -eq 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)"; exit 1; }
python3 -c 'import cryptography' 2>/dev/null || { echo "python3 with cryptography is needed (apt-get install python3-cryptography)"; exit 1; }
if [ -z "${BIN:-}" ]; then
  echo "building release..." >&2
  swift build -c release --product cosyncauth >&2
  BIN="$(swift build -c release --show-bin-path)/cosyncauth"
  KIND="release build"
else
  KIND="given binary $BIN"
  case "$BIN" in *debug*) KIND="$KIND (DEBUG: the figures mean nothing)";; esac
fi
[ -x "$BIN" ] || { echo "no executable at $BIN"; exit 1; }

pg_install_if_missing; pg_ensure_os_user
TMP="$(mktemp -d /tmp/cosync-bench-oauth.XXXXXX)"; chmod 755 "$TMP"; [ "$(id -u)" -eq 0 ] && chown "$PG_OS_USER": "$TMP"
SERVER_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; pg_stop "$TMP/data" immediate || true; rm -rf "$TMP"; }
trap cleanup EXIT
PGPORT="$(pg_free_port 59442)"
pg_init "$TMP/data"; pg_start "$TMP/data" "$PGPORT" "$TMP" "-c shared_preload_libraries=pg_stat_statements"; pg_createdb "$PGPORT" bench
PSQL="$(pg_bin)/psql -h 127.0.0.1 -p $PGPORT -U postgres bench"
$PSQL -XAtqc "CREATE EXTENSION pg_stat_statements" >/dev/null
PG_PID="$(head -1 "$TMP/data/postmaster.pid")"
HTTP_PORT="$(pg_free_port 18590)"; H="http://127.0.0.1:$HTTP_PORT"
METRICS_PORT="$(pg_free_port $((HTTP_PORT + 1)))"
# The public URL is https on a name whose parent domain is the passkey app's RP ID (the hosted page's
# origin), as behind a TLS proxy; the load generators connect to the port directly and name each
# simulated client in X-Forwarded-For (one trusted proxy).
PUBLIC_URL="https://auth.bench.localhost"
export DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/bench?sslmode=disable" PORT="$HTTP_PORT" HOST=127.0.0.1 COSYNC_METRICS_PORT="$METRICS_PORT"
export COSYNC_MASTER_KEY="$(head -c 32 /dev/urandom | base64)" COSYNC_OPERATOR_TOKEN="cop_bench_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export COSYNC_PUBLIC_URL="$PUBLIC_URL" COSYNC_TRUSTED_PROXIES=1 LOG_LEVEL=warning
# Passwords only make the refresh families' users (signup); no figure here hashes one.
export COSYNC_BCRYPT_COST=4

py() { python3 -c "$@"; }
calc() { py "print($1)"; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
# cpu_run OUT CMD...: runs CMD, shows and keeps its output in OUT, and appends the CPU seconds it used
# (user + system, all its threads): what one operation costs in CPU whatever else runs on the machine.
cpu_run() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys
run = subprocess.run(sys.argv[2:], capture_output=True, text=True)
sys.stdout.write(run.stdout)
sys.stderr.write(run.stderr)
used = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write(run.stdout + f"CPU_SECONDS {used.ru_utime + used.ru_stime:.3f}\n")
sys.exit(run.returncode)
PY
}
# cpu_ms FILE FIRST SECOND: CPU milliseconds per operation of a bench-token or bench-passkey run, whose two
# measurements (FIRST and SECOND per second, TOKEN_SECONDS each) did nearly all of its work. Its start
# (migrations, two RSA key generations) counts too, which makes this a slight overestimate.
cpu_ms() { calc "round(1000 * $(sed -nE 's/^CPU_SECONDS ([0-9.]+)/\1/p' "$1") / (($2 + $3) * $TOKEN_SECONDS), 4)"; }
ROWS="$TMP/rows"; : > "$ROWS"
row() { echo "$1|$2|$3|$4|$5|$6" >> "$ROWS"; }
per_cpu() { py 'import json,sys; r=json.load(open(sys.argv[1])); c=r["cpu_seconds"]; print(r["ok"] / max(0.01, c["server"] + c["postgres"]))' "$TMP/$1.json"; }
field() { py 'import json,sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2:]: v = v[k]
print(v)' "$@"; }
CORES=$(nproc)

echo "== $CORES cores; load average $(loadavg) at the start ($KIND)"
echo "== ceilings before the server starts"
cpu_run "$TMP/token1.txt" "$BIN" bench-token --seconds "$TOKEN_SECONDS"
cpu_run "$TMP/p256.txt" "$BIN" bench-passkey --seconds "$TOKEN_SECONDS"
RSA1=$(sed -nE 's/^raw RSA-2048 sign \(ceiling\): +([0-9.]+) .*/\1/p' "$TMP/token1.txt")
WORKERS=$(sed -nE 's/.*\(([0-9]+) workers.*/\1/p' "$TMP/token1.txt")
P256=$(sed -nE 's/^raw P-256 verify \(ceiling\): +([0-9.]+) .*/\1/p' "$TMP/p256.txt")
VERIFY_MS=$(cpu_ms "$TMP/p256.txt" "$P256" "$(sed -nE 's/^WebAuthn assertion verify \(ES256\): +([0-9.]+) .*/\1/p' "$TMP/p256.txt")")
echo "load average $(loadavg)"

"$BIN" serve >"$TMP/server.log" 2>&1 & SERVER_PID=$!
for _ in $(seq 1 150); do curl -sf "$H/readyz" >/dev/null && break; sleep 0.1; done
curl -sf "$H/readyz" >/dev/null || { echo "server did not start:"; tail -20 "$TMP/server.log"; exit 1; }

drive() {  # drive SCENARIO: runs tools/bench/oauth_load.py, its JSON in $TMP/SCENARIO.json
  python3 "$ROOT/tools/bench/oauth_load.py" "$1" --base "$H" --public-url "$PUBLIC_URL" --operator-token "$COSYNC_OPERATOR_TOKEN" \
    --server-pid "$SERVER_PID" --pg-pid "$PG_PID" --seconds "$DURATION" --connections "$CONNECTIONS" --families "$FAMILIES" \
    --users "$USERS" --psql "$PSQL" > "$TMP/$1.json" || { echo "the $1 load failed; server log:"; tail -20 "$TMP/server.log"; exit 1; }
}
brief() {  # brief SCENARIO: the run's rate, right after it
  python3 - "$TMP/$1.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r['ok']} in {r['seconds']:.1f} s = {r['rate']:.1f}/s; errors {r['errors']}; other processes {r['share']['other']:.0%} of the machine")
PY
}
show() {  # show SCENARIO SIGNS: the run's figures, where the CPU went, and the signing share of the server's CPU
  python3 - "$TMP/$1.json" "$SIGN_MS" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); one_sign_ms, signs = float(sys.argv[2]), int(sys.argv[3])
s, c = r["share"], r["cpu_seconds"]
ok = max(1, r["ok"])
print(f"  {r['ok']} in {r['seconds']:.1f} s = {r['rate']:.1f}/s over {r['connections']} connections; p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms; "
      f"errors {r['errors']}")
print(f"  CPU of the {r['cores']} cores in the window: server {s['server']:.0%}, PostgreSQL {s['postgres']:.0%}, "
      f"load generator {s['client']:.0%} ({r['client']}), other processes {s['other']:.0%}, idle {max(0, 1 - s['busy']):.0%}; load average {r['load_before']} -> {r['load_after']}")
own = c["server"] + c["postgres"]
sign_ms = signs * one_sign_ms  # CPU of the signatures, at bench-token's CPU per signature
print(f"  load generator CPU per operation {1000 * c['client'] / ok:.2f} ms (alone, one core would drive {ok / max(0.01, c['client']):.0f}/s); "
      f"server + PostgreSQL CPU per operation {1000 * own / ok:.2f} ms ({ok / max(0.01, own):.0f} per CPU-second), of which the {signs} RSA "
      f"signatures ~{sign_ms:.2f} ms ({sign_ms / max(1e-9, 1000 * own / ok):.0%})")
st = r.get("statements")
if st:
    print(f"  PostgreSQL: {st['calls'] / ok:.1f} statements per operation, {st['exec_ms'] / ok:.2f} ms of execution per operation; "
          "the most expensive (calls per operation, ms each):")
    for calls, total, query in st["top"][:4]:
        print(f"    {calls / ok:5.2f} x {total / max(1, calls):6.3f} ms  {query}")
if r.get("steps_ms"):
    print("  mean time per step (ms): " + ", ".join(f"{k} {v}" for k, v in r["steps_ms"].items()))
PY
}

echo "== refresh_token grants: $FAMILIES families, wrk -t$CONNECTIONS -c$CONNECTIONS -d${DURATION}s"
drive refresh; brief refresh
if [ "$DPOP" = 1 ]; then
  echo "== DPoP-bound refresh_token grants: $FAMILIES families (a P-256 key each), $CONNECTIONS Python threads, ${DURATION}s"
  drive dpop; brief dpop
fi
echo "== authorization-code flows with a passkey: $USERS passkey users, $CONNECTIONS browsers at a time, ${DURATION}s"
drive passkey; brief passkey

echo "== the RSA ceiling again, server idle"
cpu_run "$TMP/token2.txt" "$BIN" bench-token --seconds "$TOKEN_SECONDS"
RSA2=$(sed -nE 's/^raw RSA-2048 sign \(ceiling\): +([0-9.]+) .*/\1/p' "$TMP/token2.txt")
# A user-JWT issuance is one raw signature plus a little work, so its rate is a lower bound of the
# ceiling too: on a busy machine the best of the four readings is the closest to the physical limit.
ISSUE1=$(sed -nE 's/^user JWT issuance \(RS256\): +([0-9.]+) .*/\1/p' "$TMP/token1.txt")
ISSUE2=$(sed -nE 's/^user JWT issuance \(RS256\): +([0-9.]+) .*/\1/p' "$TMP/token2.txt")
RSA=$(calc "max($RSA1, $RSA2, $ISSUE1, $ISSUE2)")
SIGN_MS=$(calc "min($(cpu_ms "$TMP/token1.txt" "$RSA1" "$ISSUE1"), $(cpu_ms "$TMP/token2.txt" "$RSA2" "$ISSUE2"))")
echo "load average $(loadavg) at the end"

REFRESH=$(field "$TMP/refresh.json" rate); FLOWS=$(field "$TMP/passkey.json" rate)
REFRESH_CEILING=$(calc "$RSA / $REFRESH_SIGNS")
DPOP_CEILING=$(calc "1 / ($REFRESH_SIGNS / $RSA + 1 / $P256)")
FLOW_CEILING=$(calc "1 / ($FLOW_SIGNS / $RSA + 1 / $P256)")
OTHER_MAX=$(py 'import json,sys; print(max(json.load(open(f))["share"]["other"] for f in sys.argv[1:]))' "$TMP"/refresh.json "$TMP"/passkey.json $([ "$DPOP" = 1 ] && echo "$TMP/dpop.json"))

echo
echo "== figures ($KIND; $CORES cores shared by the server, PostgreSQL and the load generators)"
printf 'raw RSA-2048 sign:  %8.1f /s before, %.1f /s after (%s workers; user JWT issuance %.1f and %.1f /s); limit taken: the best, %.1f /s\n' \
  "$RSA1" "$RSA2" "$WORKERS" "$ISSUE1" "$ISSUE2" "$RSA"
printf 'raw P-256 verify:   %8.1f /s\n' "$P256"
printf 'CPU per operation:  %8.3f ms per RSA-2048 signature, %.3f ms per P-256 verify (bench-token and bench-passkey CPU time / operations)\n' "$SIGN_MS" "$VERIFY_MS"
printf 'refresh grants:     %8.1f /s = %.2f of %.1f (signs/s / %d)\n' "$REFRESH" "$(calc "$REFRESH / $REFRESH_CEILING")" "$REFRESH_CEILING" "$REFRESH_SIGNS"
show refresh "$REFRESH_SIGNS"
if [ "$DPOP" = 1 ]; then
  printf 'DPoP refreshes:     %8.1f /s = %.2f of %.1f (2 signs + 1 P-256 verify each)\n' "$(field "$TMP/dpop.json" rate)" "$(calc "$(field "$TMP/dpop.json" rate) / $DPOP_CEILING")" "$DPOP_CEILING"
  show dpop "$REFRESH_SIGNS"
fi
printf 'passkey code flows: %8.1f /s = %.2f of %.1f (4 signs + 1 P-256 verify each; 6 HTTP requests)\n' "$FLOWS" "$(calc "$FLOWS / $FLOW_CEILING")" "$FLOW_CEILING"
show passkey "$FLOW_SIGNS"
echo "server log: $(grep -ciE 'error|critical' "$TMP/server.log" || true) error lines, $(grep -ci 'warning' "$TMP/server.log" || true) warnings"
BUSY=$(calc "'BUSY: other processes used up to ' + str(round(100 * $OTHER_MAX)) + '% of the machine during a load window: the server had that much less CPU, so the rates are low' if $OTHER_MAX > 0.05 else 'quiet: other processes used at most ' + str(round(100 * $OTHER_MAX)) + '% of the machine during the load windows'")
echo "machine: $BUSY"

row "refresh grants/s vs RSA signs/s / $REFRESH_SIGNS" "$REFRESH" "$REFRESH_CEILING" "/s" ge 0.5
row "refresh grants/s vs Keycloak $KEYCLOAK_PER_VCPU/s x $CORES vCPU" "$REFRESH" "$((KEYCLOAK_PER_VCPU * CORES))" "/s" ge 1
[ "$DPOP" = 1 ] && row "DPoP refreshes/s vs 2 signs + 1 verify" "$(field "$TMP/dpop.json" rate)" "$DPOP_CEILING" "/s" ge 0.5
row "passkey code flows/s vs 4 signs + 1 verify" "$FLOWS" "$FLOW_CEILING" "/s" ge 0.5
# Per CPU-second of the server and PostgreSQL, next to the signatures' own CPU (bench-token's CPU per
# signature): what the ratio would be with the machine to themselves, whatever else ran meanwhile.
row "refreshes per server+PG CPU-s vs Keycloak" "$(per_cpu refresh)" "$KEYCLOAK_PER_VCPU" "/CPU-s" info ""
row "refreshes per CPU-s vs 2 signs' CPU" "$(per_cpu refresh)" "$(calc "1000 / ($REFRESH_SIGNS * $SIGN_MS)")" "/CPU-s" info ""
[ "$DPOP" = 1 ] && row "DPoP refreshes per CPU-s vs signs + verify" "$(per_cpu dpop)" "$(calc "1000 / ($REFRESH_SIGNS * $SIGN_MS + $VERIFY_MS)")" "/CPU-s" info ""
row "passkey flows per CPU-s vs signs + verify" "$(per_cpu passkey)" "$(calc "1000 / ($FLOW_SIGNS * $SIGN_MS + $VERIFY_MS)")" "/CPU-s" info ""
row "refresh p99 vs p50 (c=$CONNECTIONS)" "$(field "$TMP/refresh.json" p99_ms)" "$(field "$TMP/refresh.json" p50_ms)" "ms" info ""
row "passkey flow p99 vs p50 (c=$CONNECTIONS)" "$(field "$TMP/passkey.json" p99_ms)" "$(field "$TMP/passkey.json" p50_ms)" "ms" info ""
echo
echo "== summary"
python3 "$ROOT/tools/bench/goal_table.py" "$ROWS"
echo "machine: $BUSY"
echo "ratios: value / limit. The ceilings count RSA signatures (and P-256 verifies) only; the RSA verify of the"
echo "AppKey access token on the hosted page (~1/30 of a sign) and all HTTP and PostgreSQL work are the difference."
