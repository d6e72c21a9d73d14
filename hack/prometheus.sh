#!/usr/bin/env bash
# Obtain a real `prometheus` server binary for the tests and the benchmark that scrape fake node
# exporters (pysched_dev/promkit.py), the way hack/helm.sh obtains helm: PROMETHEUS when set, else
# a cache outside the repository built earlier by this script, else a build from the Go module
# proxy with the machine's Go toolchain (first run only, 6 to 15 minutes on two cores depending on
# what else runs; later runs are instant).
#
# Prints the path of the prometheus binary on stdout (last line); progress goes to stderr.
set -euo pipefail

# Go module versions v0.3XX.Y of github.com/prometheus/prometheus are Prometheus releases 3.XX.Y.
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-0.316.0}"
CACHE_ROOT="${PYSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pysched}"
BIN_DIR="$CACHE_ROOT/bin"
BIN="$BIN_DIR/prometheus-v${PROMETHEUS_VERSION}"
log() { echo "prometheus: $*" >&2; }

if [[ -n "${PROMETHEUS:-}" ]]; then
  [[ -x "$PROMETHEUS" ]] || { log "PROMETHEUS=$PROMETHEUS is not an executable file"; exit 1; }
  echo "$PROMETHEUS"
  exit 0
fi

if [[ ! -x "$BIN" ]]; then
  command -v go >/dev/null || { log "go toolchain not found and prometheus is not cached at $BIN"; exit 1; }
  mkdir -p "$BIN_DIR"
  log "building prometheus v${PROMETHEUS_VERSION} from the Go module proxy into $BIN (first run only; several minutes)"
  release="${PROMETHEUS_VERSION#0.}"
  release="${release:0:1}.${release:1}"   # 0.316.0 -> 3.16.0
  # The module has no replace directives, so `go install module@version` builds it as released
  # (without the web UI's assets, which the tests do not need: the HTTP API is all they use).
  # A private GOBIN, then an atomic rename: a concurrent run never sees a half-written binary.
  tmp="$(mktemp -d "$BIN_DIR/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS=-mod=mod go install -trimpath \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=${release} -X github.com/prometheus/common/version.Branch=HEAD" \
    "github.com/prometheus/prometheus/cmd/prometheus@v${PROMETHEUS_VERSION}"
  mv "$tmp/prometheus" "$BIN"
  log "built $BIN"
fi

echo "$BIN"
