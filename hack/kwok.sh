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

KWOK_VERSION="${KWOK_VERSION:-0.8.0}"
CACHE_ROOT="${PYSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pysched}"
BIN_DIR="$CACHE_ROOT/bin/kwok-v${KWOK_VERSION}"
log() { echo "kwok: $*" >&2; }

if [[ -n "${PYSCHED_KWOK:-}" ]]; then
  [[ -x "$PYSCHED_KWOK" ]] || { log "PYSCHED_KWOK=$PYSCHED_KWOK is not an executable file"; exit 1; }
  echo "$PYSCHED_KWOK"
  exit 0
fi

if [[ ! -x "$BIN_DIR/kwok" ]]; then
  command -v go >/dev/null || { log "go toolchain not found and kwok is not cached in $BIN_DIR"; exit 1; }
  mkdir -p "$BIN_DIR"
  log "building sigs.k8s.io/kwok v${KWOK_VERSION} from the Go module proxy into $BIN_DIR (first run only; a few minutes)"
  tmp="$(mktemp -d "$BIN_DIR/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # `go install pkg@version` builds in module mode with kwok's own go.mod and go.sum (no replace
  # lines there), so the dependency versions are exactly the release's.
  GOFLAGS= CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@v${KWOK_VERSION}"
  mv "$tmp/kwok" "$BIN_DIR/kwok"
  log "built $BIN_DIR/kwok"
fi

echo "$BIN_DIR/kwok"
