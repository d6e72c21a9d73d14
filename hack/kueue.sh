#!/usr/bin/env bash
# Obtain Kueue's manager (sigs.k8s.io/kueue/cmd/kueue), the job-queueing controller that admits
# Jobs into quota and hands their pods to pysched, the way hack/kwok.sh obtains kwok:
#   1. PYSCHED_KUEUE when it names an executable (its CRDs are then looked for in a `crds`
#      directory next to it, which the caller provides);
#   2. a cache outside the repository, keyed by the pinned version;
#   3. a build with the machine's Go toolchain, modules from the Go module proxy (first run only).
#
# The newest release the proxy serves here is v0.17.1 (Kubernetes libraries 0.35.3, the control
# plane's minor). Its go.mod has no replace lines, so `go install pkg@version` builds it with the
# release's own go.mod and go.sum. Next to the binary go Kueue's CRDs (config/components/crd/bases
# of the module, into crds/) and its webhook manifest (config/components/webhook/manifests.yaml,
# as webhook-manifests.yaml: the webhook paths), which a test installs before starting the manager.
#
# Prints the path of the binary on stdout (last line); progress goes to stderr.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh" kueue

KUEUE_VERSION="${KUEUE_VERSION:-0.17.1}"
BIN_DIR="$CACHE_ROOT/bin/kueue-v${KUEUE_VERSION}"
MODULE="sigs.k8s.io/kueue"

use_override PYSCHED_KUEUE

build() {
  # `go install pkg@version` builds in module mode with Kueue's own go.mod and go.sum (no replace
  # lines there), so the dependency versions are exactly the release's. The version variables
  # are the ones Kueue's Makefile sets; the manager logs them at start.
  GOFLAGS= CGO_ENABLED=0 GOBIN="$1" go install -trimpath \
    -ldflags "-s -w -X ${MODULE}/pkg/version.GitVersion=v${KUEUE_VERSION}" \
    "${MODULE}/cmd/kueue@v${KUEUE_VERSION}"
}
copy_manifests() {
  # the module's source (already in the module cache after the build): its CRDs and webhooks
  local src
  src="$(cd "$1" && GOFLAGS= go mod download -json "${MODULE}@v${KUEUE_VERSION}" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$src/config/components/crd/bases" ]] || { log "could not download ${MODULE}@v${KUEUE_VERSION}"; exit 1; }
  mkdir "$1/crds"
  cp "$src"/config/components/crd/bases/*.yaml "$1/crds/"
  cp "$src/config/components/webhook/manifests.yaml" "$1/webhook-manifests.yaml"
  chmod -R u+w "$1/crds" "$1/webhook-manifests.yaml"   # the module cache is read-only
  log "copied $(ls "$1/crds" | wc -l) CRDs"
}
# two builds, so that a failure to fetch the manifests keeps the binary built before it
if [[ ! -x "$BIN_DIR/kueue" ]]; then
  go_build_into "$BIN_DIR" build \
    "building ${MODULE} v${KUEUE_VERSION} from the Go module proxy into $BIN_DIR (first run only; several minutes)" kueue
fi
if [[ ! -d "$BIN_DIR/crds" || ! -f "$BIN_DIR/webhook-manifests.yaml" ]]; then
  go_build_into "$BIN_DIR" copy_manifests "" webhook-manifests.yaml crds
fi

echo "$BIN_DIR/kueue"
