#!/usr/bin/env bash
# Obtain `kwok` (Kubernetes WithOut Kubelet, sigs.k8s.io/kwok), which plays the kubelets of the
# living-cluster fixture (pysched_dev.livecluster), the way hack/control-plane.sh obtains the
# control plane:
#   1. PYSCHED_KWOK when it names an executable;
#   2. a cache outside the repository, keyed by the pinned version;
#   3. a build with the machine's Go toolchain, modules from the Go module proxy (first run only).
#
# Prints the path of the binary on stdout (last line); progress goes to stderr.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh" kwok

KWOK_VERSION="${KWOK_VERSION:-0.8.0}"
BIN_DIR="$CACHE_ROOT/bin/kwok-v${KWOK_VERSION}"

use_override PYSCHED_KWOK

build() {
  # `go install pkg@version` builds in module mode with kwok's own go.mod and go.sum (no replace
  # lines there), so the dependency versions are exactly the release's.
  GOFLAGS= CGO_ENABLED=0 GOBIN="$1" go install -trimpath \
    -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@v${KWOK_VERSION}"
}
if [[ ! -x "$BIN_DIR/kwok" ]]; then
  go_build_into "$BIN_DIR" build \
    "building sigs.k8s.io/kwok v${KWOK_VERSION} from the Go module proxy into $BIN_DIR (first run only; a few minutes)" kwok
fi

echo "$BIN_DIR/kwok"
