#!/usr/bin/env bash
# Obtain scheduler-plugins' kube-scheduler (sigs.k8s.io/scheduler-plugins), the second oracle for
# pysched's gang and quota plugins, and its status controller (cmd/controller: the PodGroup and
# ElasticQuota controllers, the oracle for pysched's status writers), the way hack/kwok.sh
# obtains kwok:
#   1. PYSCHED_SCHEDULER_PLUGINS (PYSCHED_SCHEDULER_PLUGINS_CONTROLLER for the controller) when it
#      names an executable;
#   2. a cache outside the repository, keyed by the pinned version: kube-scheduler and controller
#      side by side;
#   3. a build with the machine's Go toolchain, modules from the Go module proxy, of whichever of
#      the two is missing from the cache (first run only).
#
# The newest release the proxy serves here is v0.34.7 (Kubernetes 1.34.7; one minor behind the
# control plane, inside kube-scheduler's supported skew). Its go.mod has replace lines (so `go
# install pkg@version` refuses it): the build is a small module of our own that requires it,
# copies those replace lines, and registers the plugins pysched is compared against
# (Coscheduling, CapacityScheduling, TargetLoadPacking, NodeResourcesAllocatable) - not
# NodeResourceTopology, whose dependencies the proxy does not serve. The controller is upstream's
# own main package (sigs.k8s.io/scheduler-plugins/cmd/controller), built unchanged in that module.
#
# SCHEDULER_PLUGINS_KUBERNETES=1.35.4 builds the same release against another Kubernetes patch or
# minor release's libraries (its replace lines for k8s.io/kubernetes and the staging modules moved
# to that version; cached apart): the kube-scheduler framework's queue and backoff are that
# release's, the plugins scheduler-plugins' (docs/compatibility.md: the gang retry measurements).
#
# SCHEDULER_PLUGINS_SOURCE=DIR builds a checkout of scheduler-plugins instead of the release (its
# own go.mod's replace lines; for a version the proxy does not serve, such as master on Kubernetes
# 1.35), cached under its commit.
#
# Usage: scheduler-plugins.sh             -> prints the kube-scheduler's path (the controller is
#                                            `controller` in the same directory unless overridden)
#        scheduler-plugins.sh controller  -> prints the controller's path
# The path is the last line on stdout; progress goes to stderr.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh" scheduler-plugins

SP_VERSION="${SCHEDULER_PLUGINS_VERSION:-0.34.7}"
K8S_VERSION="${SCHEDULER_PLUGINS_KUBERNETES:-}"
if [[ -n "$K8S_VERSION" ]]; then
  SUBSTITUTES="${SCHEDULER_PLUGINS_SUBSTITUTES:-}"
else
  SUBSTITUTES="${SCHEDULER_PLUGINS_SUBSTITUTES:-k8s.io/csi-translation-lib@v0.34.8}"
fi
SRC="${SCHEDULER_PLUGINS_SOURCE:-}"
SP_LABEL="v${SP_VERSION}"
if [[ -n "$SRC" ]]; then
  [[ -f "$SRC/go.mod" ]] || { log "SCHEDULER_PLUGINS_SOURCE=$SRC has no go.mod"; exit 1; }
  SRC="$(cd "$SRC" && pwd)"
  SP_LABEL="src-$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || basename "$SRC")"
  SUBSTITUTES="${SCHEDULER_PLUGINS_SUBSTITUTES:-}"
fi
BIN_DIR="$CACHE_ROOT/bin/scheduler-plugins-${SP_LABEL}${K8S_VERSION:+-k8s-v$K8S_VERSION}"

case "${1:-}" in
  "") WANT=kube-scheduler; OVERRIDE=PYSCHED_SCHEDULER_PLUGINS ;;
  controller) WANT=controller; OVERRIDE=PYSCHED_SCHEDULER_PLUGINS_CONTROLLER ;;
  *) log "usage: $0 [controller]"; exit 2 ;;
esac

use_override "$OVERRIDE"

# what is missing from the cache: both binaries for the default call (so the controller is found
# beside the scheduler), only the controller for `controller`
missing=()
if [[ "$WANT" == kube-scheduler && ! -x "$BIN_DIR/kube-scheduler" ]]; then missing+=(kube-scheduler); fi
if [[ ! -x "$BIN_DIR/controller" ]]; then missing+=(controller); fi

# build TMP BINARY...: the build module in TMP (a scratch directory), the binaries beside it
build() {
  local tmp="$1" upstream_mod sp_k8s pin bin pkg
  shift
  if [[ -n "$SRC" ]]; then
    upstream_mod="$SRC/go.mod"
  else
    upstream_mod="$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/scheduler-plugins@v${SP_VERSION}" \
      | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  fi
  [[ -f "$upstream_mod" ]] || { log "could not download sigs.k8s.io/scheduler-plugins@v${SP_VERSION}"; exit 1; }
  {
    echo "module pysched.local/scheduler-plugins-build"
    echo
    grep -E '^go ' "$upstream_mod"
    echo
    if [[ -n "$SRC" ]]; then
      echo "require sigs.k8s.io/scheduler-plugins v0.0.0"
      echo "replace sigs.k8s.io/scheduler-plugins => $SRC"
    else
      echo "require sigs.k8s.io/scheduler-plugins v${SP_VERSION}"
    fi
    echo
    # every replace line of the release (single lines and the replace block), as it builds them
    awk '/^replace \($/ {b=1; print; next} b && /^\)$/ {b=0; print; next} b || /^replace [^(]/ {print}' "$upstream_mod"
  } > "$tmp/go.mod"
  if [[ -n "$K8S_VERSION" ]]; then
    # k8s.io/kubernetes at K8S_VERSION, its staging modules at v0.MINOR.PATCH (those the release
    # pins to another line, such as legacy-cloud-providers, are left alone)
    sp_k8s="$(sed -n 's/^[[:space:]]*k8s.io\/kubernetes => k8s.io\/kubernetes v1\.\([0-9.]*\)$/\1/p' "$tmp/go.mod")"
    sed -i -e "s#k8s.io/kubernetes => k8s.io/kubernetes v1\.${sp_k8s}\$#k8s.io/kubernetes => k8s.io/kubernetes v${K8S_VERSION}#" \
      -e "s#^\([[:space:]]*\(replace \)\{0,1\}k8s.io/[a-z0-9-]* => k8s.io/[a-z0-9-]*\) v0\.${sp_k8s}\$#\1 v0.${K8S_VERSION#1.}#" \
      "$tmp/go.mod"
  fi
  # staging modules of the release's Kubernetes the proxy does not serve here: a neighbouring
  # patch release of the same minor (the staging libraries change little between patches)
  for pin in $SUBSTITUTES; do
    (cd "$tmp" && go mod edit -dropreplace "${pin%@*}" -replace "${pin%@*}=${pin}")
  done
  cat > "$tmp/main.go" <<'GO'
// scheduler-plugins' kube-scheduler with the plugins pysched is compared against.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
	"sigs.k8s.io/scheduler-plugins/pkg/capacityscheduling"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"
	"sigs.k8s.io/scheduler-plugins/pkg/noderesources"
	"sigs.k8s.io/scheduler-plugins/pkg/trimaran/targetloadpacking"
)

func main() {
	command := app.NewSchedulerCommand(
		app.WithPlugin(capacityscheduling.Name, capacityscheduling.New),
		app.WithPlugin(coscheduling.Name, coscheduling.New),
		app.WithPlugin(noderesources.AllocatableName, noderesources.NewAllocatable),
		app.WithPlugin(targetloadpacking.Name, targetloadpacking.New),
	)
	os.Exit(cli.Run(command))
}
GO
  # upstream's controller is built from its own main package; this file (never compiled) makes
  # `go mod tidy` keep what that package needs (controller-runtime...)
  cat > "$tmp/tools.go" <<'GO'
//go:build tools

package main

import _ "sigs.k8s.io/scheduler-plugins/cmd/controller"
GO
  # a checkout's tests may import what the proxy does not serve (NodeResourceTopology's): -e
  (cd "$tmp" && GOFLAGS=-mod=mod go mod tidy ${SRC:+-e} >&2)
  for bin in "$@"; do
    case "$bin" in
      kube-scheduler) pkg=. ;;
      controller) pkg=sigs.k8s.io/scheduler-plugins/cmd/controller ;;
    esac
    (cd "$tmp" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin" "$pkg" >&2)
  done
}
if (( ${#missing[@]} )); then
  go_build_into "$BIN_DIR" build \
    "building ${missing[*]} of sigs.k8s.io/scheduler-plugins ${SP_LABEL} from the Go module proxy into $BIN_DIR (first run only; several minutes)" \
    "${missing[@]}"
fi

echo "$BIN_DIR/$WANT"
