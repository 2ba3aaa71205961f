#!/usr/bin/env bash
# Passkey benchmark: WebAuthn assertion verifications per second (ES256: what loginComplete and
# verifyComplete run for the signature, base64url, clientDataJSON and authenticatorData) next to the
# raw P-256 verify ceiling of this machine, both measured in this run (`cosyncauth bench-passkey`).
# Not part of the test command.   BIN=.build/release/cosyncauth (default: a release build)  SECONDS_EACH=5
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
if [ -z "${BIN:-}" ]; then
  echo "building release..." >&2
  swift build -c release --product cosyncauth >&2
  BIN="$(swift build -c release --show-bin-path)/cosyncauth"
fi
"$BIN" bench-passkey --seconds "${SECONDS_EACH:-5}"
