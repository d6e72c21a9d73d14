#!/usr/bin/env bash
# Obtain the `helm` binary for the chart tests (tests/e2e/test_helm_chart.py), the way
# hack/control-plane.sh obtains the control plane: HELM when set, else a cache outside the
# repository built earlier by this script, else a build from the Go module proxy with the machine's
# Go toolchain (first run only, a minute or two; later runs are instant).
#
# Prints the path of the helm binary on stdout (last line); progress goes to stderr.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-3.21.4}"
CACHE_ROOT="${PYSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pysched}"
BIN_DIR="$CACHE_ROOT/bin/helm-v${HELM_VERSION}"
log() { echo "helm: $*" >&2; }

if [[ -n "${HELM:-}" ]]; then
  [[ -x "$HELM" ]] || { log "HELM=$HELM is not an executable file"; exit 1; }
  echo "$HELM"
  exit 0
fi

if [[ ! -x "$BIN_DIR/helm" ]]; then
  command -v go >/dev/null || { log "go toolchain not found and helm is not cached in $BIN_DIR"; exit 1; }
  mkdir -p "$BIN_DIR"
  log "building helm v${HELM_VERSION} from the Go module proxy into $BIN_DIR (first run only)"
  # helm.sh/helm/v3 has no replace directives, so `go install module@version` builds it as released.
  # A private GOBIN, then an atomic rename: a concurrent run never sees a half-written binary.
  tmp="$(mktemp -d "$BIN_DIR/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  GOFLAGS= CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v${HELM_VERSION}" \
    "helm.sh/helm/v3/cmd/helm@v${HELM_VERSION}"
  mv "$tmp/helm" "$BIN_DIR/helm"
  log "built $BIN_DIR/helm"
fi

echo "$BIN_DIR/helm"
