#!/usr/bin/env bash
# Obtain `pysched-cel`, the helper that evaluates DRA device selectors with kube-scheduler's own CEL
# code (cmd/pysched-cel), the way hack/control-plane.sh obtains the control plane:
#   1. PYSCHED_CEL_HELPER when it names an executable;
#   2. a cache outside the repository, keyed by the helper's source (a change rebuilds it);
#   3. a build with the machine's Go toolchain, modules from the Go module proxy (first run only).
#
# Prints the path of the binary on stdout (last line); progress goes to stderr.
#
# PYSCHED_CEL_GOARCH=amd64|arm64: the release's build instead (pysched_dev.release: the binary the
# Linux wheels carry): cross-compiled for linux/<arch> with the machine's Go, reproducibly (no VCS
# stamp, no build id, trimmed paths), cached per source, Go version and architecture.
# PYSCHED_CEL_HELPER is ignored then: it names a binary for this machine, not for <arch>.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh" pysched-cel

SRC="$(cd "$(dirname "$0")/../cmd/pysched-cel" && pwd)"

ARCH="${PYSCHED_CEL_GOARCH:-}"
[[ -n "$ARCH" ]] || use_override PYSCHED_CEL_HELPER

key="$(cat "$SRC/main.go" "$SRC/go.mod" "$SRC/go.sum" | sha256sum | cut -c1-16)"
BIN_DIR="$CACHE_ROOT/bin/pysched-cel-$key"
build() {
  (cd "$SRC" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1/pysched-cel" .)
}
if [[ -n "$ARCH" ]]; then
  [[ "$ARCH" == amd64 || "$ARCH" == arm64 ]] || { log "PYSCHED_CEL_GOARCH=$ARCH: expected amd64 or arm64"; exit 1; }
  command -v go >/dev/null || { log "go toolchain not found: needed to build pysched-cel for linux/$ARCH"; exit 1; }
  go_version="$(go env GOVERSION)"
  BIN_DIR="$CACHE_ROOT/bin/pysched-cel-$key-$go_version-linux-$ARCH"
  build() {
    (cd "$SRC" && GOFLAGS=-mod=mod CGO_ENABLED=0 GOOS=linux GOARCH="$ARCH" \
      go build -trimpath -buildvcs=false -ldflags "-s -w -buildid=" -o "$1/pysched-cel" .)
  }
fi
if [[ ! -x "$BIN_DIR/pysched-cel" ]]; then
  go_build_into "$BIN_DIR" build "building from $SRC into $BIN_DIR (first run only; a minute or two)" pysched-cel
fi

echo "$BIN_DIR/pysched-cel"
