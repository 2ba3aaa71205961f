#!/usr/bin/env bash
# Webhook SSRF by DNS rebinding (issue 20, item 3), against the built server (.build/debug/cosyncauth or
# $BIN) and a resolver this test controls: Tests/system/ops/webhook_rebind.py runs a DNS server on 127.53.0.1
# and two HTTP listeners on one port, 127.0.0.2 (the "public" receiver) and 127.0.0.1 (a loopback
# service that must never be reached). The server runs in a mount namespace whose /etc/resolv.conf
# (bind-mounted) names that DNS server; it allows 127.0.0.2/32 only (COSYNC_WEBHOOK_ALLOW_CIDRS).
#
# The name answers 127.0.0.2 once per arming, then 127.0.0.1: the endpoint is saved (checked against
# 127.0.0.2), then an event's delivery resolves it once more (127.0.0.2, allowed). A client that resolved
# the name again to connect would now get 127.0.0.1 and post the signed event to the loopback service.
# Passes when the delivery reaches 127.0.0.2 with the name in its Host header, nothing ever reaches
# 127.0.0.1, and a delivery whose one resolution answers 127.0.0.1 is refused (logged as such).
# Needs root (a mount namespace, port 53); skips, and passes, without it.
#   OPS_KEEP_ON_FAILURE=1 keeps the temp folder (server log, DNS log) on failure.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
START="$(date +%s.%N)"

if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null || ! unshare -m true 2>/dev/null; then
  echo "webhook-rebind: SKIPPED: needs root and unshare (a mount namespace for /etc/resolv.conf, a DNS server on port 53)"
  exit 0
fi

NAME="rebind.cosync.test"
DNS=127.53.0.1
PUBLIC=127.0.0.2
LOOPBACK=127.0.0.1

ops_init webhook-rebind
ops_start_pg webhooks
ops_server_env webhooks
export COSYNC_WEBHOOK_ALLOW_HTTP=1 COSYNC_WEBHOOK_ALLOW_CIDRS="$PUBLIC/32" COSYNC_WEBHOOK_RETRY_SECONDS=0.3,0.3
export COSYNC_WEBHOOK_TIMEOUT_SECONDS=3 COSYNC_COURIER_POLL_MS=100

LISTEN="$TMP/listen"
mkdir -p "$LISTEN"
"$PYTHON" "$OPS_DIR/webhook_rebind.py" "$LISTEN" "$DNS" "$NAME" "$PUBLIC" "$LOOPBACK" >"$TMP/rebind.log" 2>&1 &
OPS_PIDS+=("$!")
for _ in $(seq 1 100); do [ -s "$LISTEN/port" ] && break; sleep 0.05; done
[ -s "$LISTEN/port" ] || { echo "webhook_rebind.py did not start:"; cat "$TMP/rebind.log"; exit 1; }
PORT="$(cat "$LISTEN/port")"

# The server, in its own mount namespace, resolves through the DNS server above only.
printf 'nameserver %s\noptions timeout:1 attempts:2\n' "$DNS" >"$TMP/resolv.conf"
REAL_BIN="$BIN"
cat >"$TMP/cosyncauth-ns" <<EOF
#!/bin/sh
exec unshare -m -- sh -c 'mount --bind "\$0" /etc/resolv.conf && exec "\$@"' "$TMP/resolv.conf" "$REAL_BIN" "\$@"
EOF
chmod +x "$TMP/cosyncauth-ns"
BIN="$TMP/cosyncauth-ns"
ops_start_server "$TMP/server.log"
BIN="$REAL_BIN"
echo "server pid $SERVER_PID on $BASE; DNS $DNS; listeners $PUBLIC:$PORT and $LOOPBACK:$PORT"
# The server's own view of the file (its mount namespace), through /proc.
grep -q "$DNS" "/proc/$SERVER_PID/root/etc/resolv.conf" || { echo "the server does not see the test's resolv.conf"; exit 1; }
grep -q "$DNS" /etc/resolv.conf && { echo "the test's resolv.conf leaked out of the namespace"; exit 1; }

ops_create_app "Webhook rebind" >/dev/null
touch "$LISTEN/arm"
HOOK="$(ops_admin POST "/admin/v1/apps/$APP_ID/webhooks" "{\"url\":\"http://$NAME:$PORT/hook\",\"eventTypes\":[\"user.created\"]}")"
HOOK_ID="$(ops_json webhookId <<<"$HOOK")"
echo "endpoint $HOOK_ID saved (checked against $PUBLIC)"

# An event: its delivery resolves the name once more (armed: 127.0.0.2), then must connect there.
touch "$LISTEN/arm"
ops_create_user "rebind@example.com" "Rebind-pass-1"
for _ in $(seq 1 100); do
  [ -s "$LISTEN/$PUBLIC.jsonl" ] || [ -s "$LISTEN/$LOOPBACK.jsonl" ] && break
  sleep 0.1
done
sleep 1
ATTEMPTS="$(ops_psql webhooks "SELECT string_agg(coalesce(http_status::text, '-') || ' ' || coalesce(error, ''), '; ' ORDER BY id) FROM webhook_attempts WHERE endpoint_id = '$HOOK_ID'")"
DELIVERY="$(ops_psql webhooks "SELECT status FROM webhook_deliveries WHERE endpoint_id = '$HOOK_ID'")"
echo "attempts: $ATTEMPTS; delivery $DELIVERY"
echo "DNS answers: $(tr '\n' ';' <"$LISTEN/dns.log")"
echo "public listener: $(cat "$LISTEN/$PUBLIC.jsonl" 2>/dev/null | tr '\n' ' ')"
echo "loopback listener: $(cat "$LISTEN/$LOOPBACK.jsonl" 2>/dev/null | tr '\n' ' ')"
ops_check "the rebinding name's delivery never reached the loopback service" test ! -s "$LISTEN/$LOOPBACK.jsonl"
ops_check "it reached the checked address ($PUBLIC) once, with Host: $NAME:$PORT" \
  bash -c "[ -s '$LISTEN/$PUBLIC.jsonl' ] && [ \"\$(wc -l <'$LISTEN/$PUBLIC.jsonl')\" -eq 1 ] && grep -q '\"host\": \"$NAME:$PORT\"' '$LISTEN/$PUBLIC.jsonl'"
ops_check "the delivery is marked delivered ($DELIVERY)" test "$DELIVERY" = delivered

# Not armed: the one resolution answers 127.0.0.1, so the attempt is refused before any connection.
ops_create_user "rebind2@example.com" "Rebind-pass-1"
REFUSED=""
for _ in $(seq 1 100); do
  REFUSED="$(ops_psql webhooks "SELECT count(*) FROM webhook_attempts WHERE endpoint_id = '$HOOK_ID' AND error LIKE 'refused:%'")"
  [ "$REFUSED" -ge 1 ] && break
  sleep 0.1
done
ops_check "a delivery whose resolution answers $LOOPBACK is refused ($REFUSED refused attempt(s)), nothing reached it" \
  bash -c "[ '$REFUSED' -ge 1 ] && [ ! -s '$LISTEN/$LOOPBACK.jsonl' ]"
ops_stop_server
if [ "$OPS_FAILED" -ne 0 ]; then echo "---- server log ----"; tail -30 "$TMP/server.log"; fi
echo "webhook rebind test: $([ "$OPS_FAILED" -eq 0 ] && echo PASS || echo FAIL) in $(ops_elapsed "$START") s"
[ "$OPS_FAILED" -eq 0 ]
