#!/usr/bin/env bash
# Obtain `actionlint` (github.com/rhysd/actionlint), which checks the GitHub Actions workflows in
# .github/workflows, the way hack/kwok.sh obtains kwok:
#   1. PYSCHED_ACTIONLINT when it names an executable;
#   2. a cache outside the repository, keyed by the pinned version;
#   3. a build with the machine's Go toolchain, modules from the Go module proxy (first run only).
#
# Prints the path of the binary on stdout (last line); progress goes to stderr.
set -euo pipefail

ACTIONLINT_VERSION="${ACTIONLINT_VERSION:-1.7.12}"
CACHE_ROOT="${PYSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pysched}"
BIN_DIR="$CACHE_ROOT/bin/actionlint-v${ACTIONLINT_VERSION}"
log() { echo "actionlint: $*" >&2; }

if [[ -n "${PYSCHED_ACTIONLINT:-}" ]]; then
  [[ -x "$PYSCHED_ACTIONLINT" ]] || { log "PYSCHED_ACTIONLINT=$PYSCHED_ACTIONLINT is not an executable file"; exit 1; }
  echo "$PYSCHED_ACTIONLINT"
  exit 0
fi

if [[ ! -x "$BIN_DIR/actionlint" ]]; then
  command -v go >/dev/null || { log "go toolchain not found and actionlint is not cached in $BIN_DIR"; exit 1; }
  mkdir -p "$BIN_DIR"
  log "building github.com/rhysd/actionlint v${ACTIONLINT_VERSION} from the Go module proxy into $BIN_DIR (first run only; a minute or so)"
  tmp="$(mktemp -d "$BIN_DIR/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # `go install pkg@version` builds in module mode with actionlint's own go.mod and go.sum (no
  # replace lines there), so the dependency versions are exactly the release's; `actionlint
  # -version` reads the version from the module's build info.
  GOFLAGS= CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w" \
    "github.com/rhysd/actionlint/cmd/actionlint@v${ACTIONLINT_VERSION}"
  mv "$tmp/actionlint" "$BIN_DIR/actionlint"
  log "built $BIN_DIR/actionlint"
fi

echo "$BIN_DIR/actionlint"
