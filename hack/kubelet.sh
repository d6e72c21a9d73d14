#!/usr/bin/env bash
# Obtain the real node's kubelet and pause image for pysched_dev.realcluster (`make real-cluster`,
# tests/real), the way hack/control-plane.sh obtains the control plane:
#   1. PYSCHED_KUBELET_DIR when it names a directory holding both;
#   2. a cache outside the repository, keyed by the version ($CACHE_ROOT/bin/kubelet-v<version>);
#   3. a build with the machine's Go toolchain from the Go module proxy (first run only): the kubelet
#      in a module of our own requiring k8s.io/kubernetes (hack/lib.sh's k8s_module, in its own
#      $CACHE_ROOT/src/kubelet-v<version>), the pause binary with `gcc -static` from the
#      build/pause/linux/pause.c that the same module ships, made an image with umoci and written as
#      a docker-archive with skopeo (hack/real-node-deps.sh installs both).
#
# KUBELET_VERSION defaults to 1.35.4: Debian 12's containerd 1.6 serves kubelets up to 1.35 (1.36
# needs containerd 2), and a 1.35 kubelet against the 1.37 control plane is within the supported
# version skew (kubelet up to three minors older than kube-apiserver).
#
# The directory holds `kubelet`, `pause.tar` (docker-archive) and `pause.ref` (the image name that
# archive carries: containerd's sandbox_image). Prints the directory on stdout (last line);
# progress goes to stderr.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh" kubelet

KUBELET_VERSION="${KUBELET_VERSION:-1.35.4}"
BIN_DIR="$CACHE_ROOT/bin/kubelet-v${KUBELET_VERSION}"
PAUSE_REF="localhost/pysched/pause:v${KUBELET_VERSION}"

if [[ -n "${PYSCHED_KUBELET_DIR:-}" ]]; then
  for f in kubelet pause.tar pause.ref; do
    [[ -e "$PYSCHED_KUBELET_DIR/$f" ]] || { log "PYSCHED_KUBELET_DIR=$PYSCHED_KUBELET_DIR has no $f"; exit 1; }
  done
  echo "$PYSCHED_KUBELET_DIR"
  exit 0
fi

export GOFLAGS="${GOFLAGS:--mod=mod}"
export CGO_ENABLED=0
SRC="$CACHE_ROOT/src/kubelet-v${KUBELET_VERSION}"

build_kubelet() {
  k8s_module "$SRC" "$KUBELET_VERSION" cmd/kubelet
  k8s_build "$SRC" "$KUBELET_VERSION" "$1/kubelet" cmd/kubelet
}
if [[ ! -x "$BIN_DIR/kubelet" ]]; then
  go_build_into "$BIN_DIR" build_kubelet \
    "building kubelet v${KUBELET_VERSION} from the Go module proxy in $SRC (first run only; about a minute on a warm Go build cache, several cold)" \
    kubelet
fi

# build_pause TMP: pause.tar and pause.ref
build_pause() {
  local tmp="$1" mod_dir tool
  for tool in gcc umoci skopeo; do
    command -v "$tool" >/dev/null || { log "$tool not found (hack/real-node-deps.sh installs it)"; exit 1; }
  done
  mod_dir="$(cd "$tmp" && GOFLAGS='' go mod download -json "k8s.io/kubernetes@v${KUBELET_VERSION}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  [[ -f "$mod_dir/build/pause/linux/pause.c" ]] || { log "no build/pause/linux/pause.c in k8s.io/kubernetes@v${KUBELET_VERSION}"; exit 1; }
  gcc -Os -static -DVERSION="v${KUBELET_VERSION}-pysched" -o "$tmp/pause" "$mod_dir/build/pause/linux/pause.c"
  strip "$tmp/pause"
  (
    cd "$tmp"
    umoci --log error init --layout oci
    umoci --log error new --image oci:pause
    umoci --log error insert --image oci:pause ./pause /pause
    umoci --log error config --image oci:pause --config.entrypoint /pause --config.user 65535:65535
    skopeo copy --quiet oci:oci:pause "docker-archive:pause.tar:${PAUSE_REF}"
  )
  echo "$PAUSE_REF" > "$tmp/pause.ref"
}
if [[ ! -s "$BIN_DIR/pause.tar" || "$(cat "$BIN_DIR/pause.ref" 2>/dev/null)" != "$PAUSE_REF" ]]; then
  go_build_into "$BIN_DIR" build_pause "building the pause image ${PAUSE_REF} (gcc -static, umoci, skopeo)" pause.tar pause.ref
fi

echo "$BIN_DIR"
