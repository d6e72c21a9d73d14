#!/usr/bin/env bash
# Obtain the `helm` binary for the chart tests (tests/e2e/test_helm_chart.py), the way
# hack/control-plane.sh obtains the control plane: HELM when set, else a cache outside the
# repository built earlier by this script, else a build from the Go module proxy with the machine's
# Go toolchain (first run only, a minute or two; later runs are instant).
#
# Prints the path of the helm binary on stdout (last line); progress goes to stderr.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh" helm

HELM_VERSION="${HELM_VERSION:-3.21.4}"
BIN_DIR="$CACHE_ROOT/bin/helm-v${HELM_VERSION}"

use_override HELM

build() {
  # helm.sh/helm/v3 has no replace directives, so `go install module@version` builds it as released.
  GOFLAGS= CGO_ENABLED=0 GOBIN="$1" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v${HELM_VERSION}" \
    "helm.sh/helm/v3/cmd/helm@v${HELM_VERSION}"
}
if [[ ! -x "$BIN_DIR/helm" ]]; then
  go_build_into "$BIN_DIR" build \
    "building helm v${HELM_VERSION} from the Go module proxy into $BIN_DIR (first run only)" helm
fi

echo "$BIN_DIR/helm"
