#!/usr/bin/env bash
# Obtain the real control-plane binaries (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager) and kubectl (its kustomize renders the manifests in the tests) for tests,
# the demo and the benchmark.
#
# Order of preference:
#   1. KUBEBUILDER_ASSETS (envtest convention) for etcd and kube-apiserver, when it holds them;
#   2. a cache outside the repository, built earlier by this script;
#   3. a build from the Go module proxy with the machine's Go toolchain.
# kube-scheduler, kube-controller-manager and kubectl are not part of envtest's assets, so they are
# always taken from the cache/build.
#
# Prints the directory holding all five binaries on stdout (last line); progress goes to stderr.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh" control-plane

# The primary release is the newest pysched follows (1.37); `K8S_VERSION=1.35.4` gives the oldest
# one's, for make test's second leg. etcd: the minor release kubeadm pins for that Kubernetes
# (cmd/kubeadm/app/constants: 3.7.0 for 1.37; 3.6 for 1.35, at its latest patch).
K8S_VERSION="${K8S_VERSION:-1.37.2}"
case "$K8S_VERSION" in
  1.35.*) default_etcd=3.6.16 ;;
  *) default_etcd=3.7.0 ;;
esac
ETCD_VERSION="${ETCD_VERSION:-$default_etcd}"
BIN_DIR="$CACHE_ROOT/bin/k8s-v${K8S_VERSION}-etcd-v${ETCD_VERSION}"

mkdir -p "$BIN_DIR"

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  for b in etcd kube-apiserver; do
    if [[ -x "$KUBEBUILDER_ASSETS/$b" && ! -e "$BIN_DIR/$b" ]]; then
      log "using $b from KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
      ln -sf "$KUBEBUILDER_ASSETS/$b" "$BIN_DIR/$b"
    fi
  done
fi

need_k8s=()
for b in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
  [[ -x "$BIN_DIR/$b" ]] || need_k8s+=("$b")
done

export GOFLAGS="${GOFLAGS:--mod=mod}"
export CGO_ENABLED=0

# build_k8s TMP BINARY...: builds in a module of our own under $CACHE_ROOT/src that requires
# k8s.io/kubernetes (its staging modules replaced by their published versions), into TMP
build_k8s() {
  local tmp="$1" src="$CACHE_ROOT/src/k8s-v${K8S_VERSION}" b
  shift
  k8s_module "$src" "$K8S_VERSION" cmd/kube-apiserver cmd/kube-scheduler cmd/kube-controller-manager cmd/kubectl
  for b in "$@"; do
    k8s_build "$src" "$K8S_VERSION" "$tmp/$b" "cmd/$b"
  done
}
if [[ ${#need_k8s[@]} -gt 0 ]]; then
  go_build_into "$BIN_DIR" build_k8s \
    "building ${need_k8s[*]} v${K8S_VERSION} from the Go module proxy in $CACHE_ROOT/src/k8s-v${K8S_VERSION} (first run only; several minutes)" \
    "${need_k8s[@]}"
fi

# build_etcd TMP: the same for etcd's server module
build_etcd() {
  local src="$CACHE_ROOT/src/etcd-v${ETCD_VERSION}"
  mkdir -p "$src"
  cat > "$src/go.mod" <<MOD
module pysched.local/etcd

go 1.24

require go.etcd.io/etcd/server/v3 v${ETCD_VERSION}
MOD
  cat > "$src/tools.go" <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  (cd "$src" && { go mod tidy -e >&2 2>&1 || true; })
  (cd "$src" && go build -trimpath -ldflags "-s -w" -o "$1/etcd" go.etcd.io/etcd/server/v3)
}
if [[ ! -x "$BIN_DIR/etcd" ]]; then
  go_build_into "$BIN_DIR" build_etcd \
    "building etcd v${ETCD_VERSION} from the Go module proxy in $CACHE_ROOT/src/etcd-v${ETCD_VERSION}" etcd
fi

echo "$BIN_DIR"
