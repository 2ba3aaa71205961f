# Sourced by the benchmarks: `bench_binary` sets BIN to the release build in .build-release (git-ignored,
# incremental; built here) unless BIN already names a binary, and KIND to what BIN is.
bench_binary() {
  local root; root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  if [ -z "${BIN:-}" ]; then
    echo "building release (.build-release)..." >&2
    swift build -c release --product cosyncauth --scratch-path "$root/.build-release" >&2
    BIN="$root/.build-release/release/cosyncauth"
    KIND="release build"
  else
    KIND="given binary $BIN"
    case "$BIN" in *debug*) KIND="$KIND (DEBUG: the figures mean nothing)";; esac
  fi
  [ -x "$BIN" ] || { echo "no executable at $BIN" >&2; return 1; }
}
