#!/usr/bin/env bash
# Operations tests of the built server (.build/debug/cosyncauth, or $BIN), one after the other:
#   sigterm-test.sh  graceful shutdown under load (readyz draining, no dropped request, exit 0)
#   backup-test.sh   pg_dump / pg_restore, the restored database serves the same users and tokens; doctor
#   trace-test.sh    OTLP/HTTP JSON spans of a login; LOG_FORMAT=json logs
#   dbdown-test.sh   PostgreSQL stopped under a running server: fast 503s, reconnect, SIGTERM exits 0
#   webhook-kill-test.sh  a committed event survives SIGKILL: delivered after the restart, same webhook-id
#   webhook-rebind-test.sh  DNS rebinding: a delivery connects to the address it checked, never to the
#                    loopback address the name answers next (needs root: a mount namespace; else skipped)
#   metrics-test.sh  /metrics only on the metrics listener (404 on the public port); off; bad ports refused
# Each starts its own throwaway PostgreSQL and server on free ports and cleans up after itself.
# Prints a summary; exits 1 when any test fails. Builds nothing.
#   OPS_TESTS="sigterm backup trace" to run a subset.
set -uo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN="${BIN:-$(cd "$DIR/../../.." && pwd)/.build/debug/cosyncauth}"
export BIN
[ -x "$BIN" ] || { echo "ops: no server binary at $BIN (set BIN, or build it)" >&2; exit 2; }

CURRENT=""
trap 'echo; echo "ops: interrupted during $CURRENT" >&2; exit 130' INT TERM
SUMMARY=()
FAILED=0
for name in ${OPS_TESTS:-sigterm dbdown backup trace webhook-kill metrics}; do
  CURRENT="$name"
  echo "==================== $name-test.sh"
  start="$(date +%s.%N)"
  bash "$DIR/$name-test.sh"
  rc=$?
  took="$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')"
  if [ "$rc" -eq 0 ]; then SUMMARY+=("PASS  $name-test.sh  (${took} s)"); else SUMMARY+=("FAIL  $name-test.sh  (exit $rc, ${took} s)"); FAILED=$((FAILED + 1)); fi
done
echo "==================== summary ($BIN)"
printf '%s\n' "${SUMMARY[@]}"
[ "$FAILED" -eq 0 ] && echo "ops: all passed" || echo "ops: $FAILED failed"
[ "$FAILED" -eq 0 ]
