#!/usr/bin/env bash
# Obtain `pysched-cel`, the helper that evaluates DRA device selectors with kube-scheduler's own CEL
# code (cmd/pysched-cel), the way hack/control-plane.sh obtains the control plane:
#   1. PYSCHED_CEL_HELPER when it names an executable;
#   2. a cache outside the repository, keyed by the helper's source (a change rebuilds it);
#   3. a build with the machine's Go toolchain, modules from the Go module proxy (first run only).
#
# Prints the path of the binary on stdout (last line); progress goes to stderr.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh" pysched-cel

SRC="$(cd "$(dirname "$0")/../cmd/pysched-cel" && pwd)"

use_override PYSCHED_CEL_HELPER

key="$(cat "$SRC/main.go" "$SRC/go.mod" "$SRC/go.sum" | sha256sum | cut -c1-16)"
BIN_DIR="$CACHE_ROOT/bin/pysched-cel-$key"
build() {
  (cd "$SRC" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1/pysched-cel" .)
}
if [[ ! -x "$BIN_DIR/pysched-cel" ]]; then
  go_build_into "$BIN_DIR" build "building from $SRC into $BIN_DIR (first run only; a minute or two)" pysched-cel
fi

echo "$BIN_DIR/pysched-cel"
