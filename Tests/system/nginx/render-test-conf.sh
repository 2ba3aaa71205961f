#!/usr/bin/env bash
# Renders Tests/system/nginx/nginx-test.conf.template into DIR/nginx.conf for a test on this machine.
#   render-test-conf.sh DIR LISTEN UPSTREAM...
#   e.g. render-test-conf.sh /tmp/lb 127.0.0.1:18080 127.0.0.1:18081 127.0.0.1:18082
# Then: nginx -e DIR/error.log -p DIR -c DIR/nginx.conf   (foreground: the config says daemon off)
# Prints the path of the rendered file.
set -euo pipefail
if [ "$#" -lt 3 ]; then
  echo "usage: $0 DIR LISTEN UPSTREAM..." >&2
  exit 2
fi
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
DIR="$(cd "$1" && pwd)"
LISTEN="$2"
shift 2
UPSTREAMS=""
for upstream in "$@"; do
  UPSTREAMS="${UPSTREAMS}server ${upstream} max_fails=3 fail_timeout=10s; "
done
# | as the sed delimiter: paths contain /, addresses contain : and [ ].
sed -e "s|__DIR__|${DIR}|g" -e "s|__LISTEN__|${LISTEN}|g" -e "s|__UPSTREAMS__|${UPSTREAMS}|g" \
  "$HERE/nginx-test.conf.template" >"$DIR/nginx.conf"
echo "$DIR/nginx.conf"
