#!/usr/bin/env bash
# Obtain `pysched-cel`, the helper that evaluates DRA device selectors with kube-scheduler's own CEL
# code (cmd/pysched-cel), the way hack/control-plane.sh obtains the control plane:
#   1. PYSCHED_CEL_HELPER when it names an executable;
#   2. a cache outside the repository, keyed by the helper's source (a change rebuilds it);
#   3. a build with the machine's Go toolchain, modules from the Go module proxy (first run only).
#
# Prints the path of the binary on stdout (last line); progress goes to stderr.
set -euo pipefail

SRC="$(cd "$(dirname "$0")/../cmd/pysched-cel" && pwd)"
CACHE_ROOT="${PYSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pysched}"
log() { echo "pysched-cel: $*" >&2; }

if [[ -n "${PYSCHED_CEL_HELPER:-}" ]]; then
  [[ -x "$PYSCHED_CEL_HELPER" ]] || { log "PYSCHED_CEL_HELPER=$PYSCHED_CEL_HELPER is not an executable file"; exit 1; }
  echo "$PYSCHED_CEL_HELPER"
  exit 0
fi

key="$(cat "$SRC/main.go" "$SRC/go.mod" "$SRC/go.sum" | sha256sum | cut -c1-16)"
BIN_DIR="$CACHE_ROOT/bin/pysched-cel-$key"
if [[ ! -x "$BIN_DIR/pysched-cel" ]]; then
  command -v go >/dev/null || { log "go toolchain not found and pysched-cel is not cached in $BIN_DIR"; exit 1; }
  mkdir -p "$BIN_DIR"
  log "building from $SRC into $BIN_DIR (first run only; a minute or two)"
  tmp="$(mktemp -d "$BIN_DIR/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$SRC" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/pysched-cel" .)
  mv "$tmp/pysched-cel" "$BIN_DIR/pysched-cel"
  log "built $BIN_DIR/pysched-cel"
fi

echo "$BIN_DIR/pysched-cel"
