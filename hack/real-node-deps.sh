#!/usr/bin/env bash
# Install the Debian packages the real node (pysched_dev.realcluster, `make real-cluster`,
# tests/real) and the image build need, when any is missing:
#   containerd runc iptables conntrack containernetworking-plugins  the node (iptables and conntrack
#                                                                   are what the kubelet expects on
#                                                                   PATH; the cluster adds no rule)
#   umoci skopeo gcc libc6-dev binutils                             the pause image (hack/kubelet.sh:
#                                                                   gcc -static needs libc.a, strip)
#   mmdebstrap buildah                                              the project image (hack/image.sh)
# Nothing is configured or started: the cluster runs its own containerd on a private socket. On a
# systemd host, Debian's containerd package enables and starts containerd.service on
# /run/containerd at install time; this script leaves that service alone (the cluster neither uses
# nor stops it); `systemctl disable --now containerd` turns it off if it is not wanted.
#
# Needs root and apt-get; exits 2 with a message naming what is missing otherwise (the test
# fixture skips on that). Prints "ok" on stdout (last line) when every package is installed.
set -euo pipefail

log() { echo "real-node-deps: $*" >&2; }

PACKAGES=(containerd runc iptables conntrack containernetworking-plugins umoci skopeo gcc libc6-dev binutils
          mmdebstrap buildah)

missing=()
for p in "${PACKAGES[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then
  echo ok
  exit 0
fi

if (( EUID != 0 )); then
  log "not root: cannot install ${missing[*]} (the real node needs root anyway)"
  exit 2
fi
if ! command -v apt-get >/dev/null; then
  log "no apt-get: install ${missing[*]} (Debian 12 package names) by other means"
  exit 2
fi

log "installing ${missing[*]} (apt-get, no recommends)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
echo ok
