#!/usr/bin/env bash
# Benchmark: 10,000 apps. Uses the server started by deploy/run.sh (or URL/TOKEN you give).
#   tools/bench/apps.sh [COUNT]        (MEASURE_ONLY=1: time reads on the apps already there)        URL=http://localhost:8080 TOKEN=cop_... by default from .local/
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
URL="${URL:-http://localhost:${PORT:-8080}}"
TOKEN="${TOKEN:-$(cat "$ROOT/.local/secrets/operator-token")}"
exec python3 "$ROOT/tools/bench/apps.py" --url "$URL" --token "$TOKEN" --count "${1:-10000}" --workers "${WORKERS:-4}" ${MEASURE_ONLY:+--measure-only}
