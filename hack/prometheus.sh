#!/usr/bin/env bash
# Obtain a real `prometheus` server binary for the tests and the benchmark that scrape fake node
# exporters (pysched_dev/promkit.py), the way hack/helm.sh obtains helm: PROMETHEUS when set, else
# a cache outside the repository built earlier by this script, else a build from the Go module
# proxy with the machine's Go toolchain (first run only, 6 to 15 minutes on two cores depending on
# what else runs; later runs are instant).
#
# Prints the path of the prometheus binary on stdout (last line); progress goes to stderr.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh" prometheus

# Go module versions v0.3XX.Y of github.com/prometheus/prometheus are Prometheus releases 3.XX.Y.
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-0.316.0}"
# unlike the other tools', the cached binary is a file directly in bin/, named by its version
BIN_DIR="$CACHE_ROOT/bin"
NAME="prometheus-v${PROMETHEUS_VERSION}"

use_override PROMETHEUS

build() {
  local release="${PROMETHEUS_VERSION#0.}"
  release="${release:0:1}.${release:1}"   # 0.316.0 -> 3.16.0
  # The module has no replace directives, so `go install module@version` builds it as released
  # (without the web UI's assets, which the tests do not need: the HTTP API is all they use).
  GOBIN="$1" CGO_ENABLED=0 GOFLAGS=-mod=mod go install -trimpath \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=${release} -X github.com/prometheus/common/version.Branch=HEAD" \
    "github.com/prometheus/prometheus/cmd/prometheus@v${PROMETHEUS_VERSION}"
  mv "$1/prometheus" "$1/$NAME"
}
if [[ ! -x "$BIN_DIR/$NAME" ]]; then
  go_build_into "$BIN_DIR" build \
    "building prometheus v${PROMETHEUS_VERSION} from the Go module proxy into $BIN_DIR/$NAME (first run only; several minutes)" "$NAME"
fi

echo "$BIN_DIR/$NAME"
