#!/usr/bin/env bash
# Obtain `actionlint` (github.com/rhysd/actionlint), which checks the GitHub Actions workflows in
# .github/workflows, the way hack/kwok.sh obtains kwok:
#   1. PYSCHED_ACTIONLINT when it names an executable;
#   2. a cache outside the repository, keyed by the pinned version;
#   3. a build with the machine's Go toolchain, modules from the Go module proxy (first run only).
#
# Prints the path of the binary on stdout (last line); progress goes to stderr.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh" actionlint

ACTIONLINT_VERSION="${ACTIONLINT_VERSION:-1.7.12}"
BIN_DIR="$CACHE_ROOT/bin/actionlint-v${ACTIONLINT_VERSION}"

use_override PYSCHED_ACTIONLINT

build() {
  # `go install pkg@version` builds in module mode with actionlint's own go.mod and go.sum (no
  # replace lines there), so the dependency versions are exactly the release's; `actionlint
  # -version` reads the version from the module's build info.
  GOFLAGS= CGO_ENABLED=0 GOBIN="$1" go install -trimpath \
    -ldflags "-s -w" \
    "github.com/rhysd/actionlint/cmd/actionlint@v${ACTIONLINT_VERSION}"
}
if [[ ! -x "$BIN_DIR/actionlint" ]]; then
  go_build_into "$BIN_DIR" build \
    "building github.com/rhysd/actionlint v${ACTIONLINT_VERSION} from the Go module proxy into $BIN_DIR (first run only; a minute or so)" actionlint
fi

echo "$BIN_DIR/actionlint"
