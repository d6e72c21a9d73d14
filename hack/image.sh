#!/usr/bin/env bash
# Build the pysched container image from the Dockerfile, with or without a container registry, and
# write what a release ships and an operator checks into one output directory:
#
#   image.oci.tar   the image as an OCI archive (index.json names it $IMAGE in
#                   org.opencontainers.image.ref.name and io.containerd.image.name; a docker
#                   manifest.json beside it): `ctr -n k8s.io images import`, `docker load`,
#                   `podman load`, `skopeo copy oci-archive:...` all take it
#   image.digest    the image manifest's digest (sha256:...), the one a registry and containerd show
#   sbom.cdx.json   CycloneDX 1.6: Debian packages, Python distributions, the Go modules of pysched-cel
#   scan.json       what the image holds (pysched_dev.imagescan): user, entrypoint, env, labels,
#                   layers, packages, setuid files, world-writable directories
#
# and prints that directory as the last line of stdout (progress and per-step timings go to stderr).
#
# Environment (the Makefile's variables of the same names):
#   IMAGE       tag of the image (default ghcr.io/pysched/pysched:<pysched.__version__>, the name the
#               chart and manifests deploy, so an imported archive serves them as shipped)
#   IMAGE_OUT   output directory (default $CACHE_ROOT/image/out/<key>, the key hashing the build
#               inputs: the git-tracked files the Dockerfile copies, the Dockerfile, the base images'
#               ids, IMAGE and the labels; an unchanged tree reuses it in seconds). When set, the
#               cached result is copied there.
#   DOCKER      docker | buildah | empty: docker when a Docker engine answers, else buildah
#   BASE_IMAGE, GO_IMAGE
#               base images (default: the Dockerfile's). When not given and the Dockerfile's default
#               cannot be pulled (no registry reachable), local ones are built first and cached in
#               the private storage, keyed by their inputs: a Debian bookworm rootfs with Python 3.11,
#               pip and venv (mmdebstrap) as BASE_IMAGE, and that plus the Go toolchain from the Go
#               module proxy (golang.org/toolchain, GO_VERSION) as GO_IMAGE
#   CA_BUNDLE   CA bundle mounted read-only into the build's RUN steps (build time only; default the
#               host's): pip and go reach PyPI and the Go module proxy behind a TLS-intercepting proxy
#
# buildah runs with a private storage under $CACHE_ROOT/containers (--isolation chroot, --network host:
# no CNI bridge, no host-wide setting) and needs root. Docker needs skopeo to export its image.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh" image

REPO="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PY:-$REPO/.venv/bin/python}"
[[ -x "$PY" ]] || PY=python3
VERSION="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$REPO/scheduler/pysched/__init__.py")"
[[ -n "$VERSION" ]] || { log "no __version__ in scheduler/pysched/__init__.py"; exit 1; }
IMAGE="${IMAGE:-ghcr.io/pysched/pysched:$VERSION}"
"$PY" -c 'import cyclonedx_py' 2>/dev/null || {
  log "$PY has no cyclonedx-py (the SBOM's generator): make venv, or pip install -e '.[test]'"; exit 1; }
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
# The Go toolchain of the local GO_IMAGE: at least cmd/pysched-cel/go.mod's `go` directive (checked).
GO_VERSION="${GO_VERSION:-1.26.8}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DEBIAN_SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
IMAGE_SOURCE="${IMAGE_SOURCE:-https://github.com/pysched/pysched}"
WORK="$CACHE_ROOT/image"
case "$(uname -m)" in
  x86_64) ARCH=amd64 ;;
  aarch64 | arm64) ARCH=arm64 ;;
  *) log "unsupported machine $(uname -m)"; exit 1 ;;
esac

T0=$SECONDS
STEP_T=$SECONDS
# step NAME: log the time the previous step took, then start NAME
step() {
  if [[ -n "${STEP_NAME:-}" ]]; then log "step=$STEP_NAME seconds=$((SECONDS - STEP_T))"; fi
  STEP_NAME="$1"
  STEP_T=$SECONDS
}

mkdir -p "$WORK"
# one build at a time (the private storage, the cache directories)
exec 9>"$WORK/.lock"
flock 9

rm -rf "$WORK"/.tmp.*   # left by an interrupted run (we hold the lock)
# new_scratch: SCRATCH=a fresh directory, removed at exit (lib.sh's EXIT trap; not from a subshell)
new_scratch() {
  SCRATCH="$(mktemp -d "$WORK/.tmp.XXXXXX")"
  _HACK_BUILD_DIRS+=("$SCRATCH")
}

# --- the engine ------------------------------------------------------------------------------------
ENGINE="${DOCKER:-}"
if [[ -z "$ENGINE" ]]; then
  if command -v docker >/dev/null && timeout 5 docker info >/dev/null 2>&1; then ENGINE=docker; else ENGINE=buildah; fi
fi
case "$ENGINE" in
  docker)
    command -v skopeo >/dev/null || { log "docker builds are exported with skopeo: install it"; exit 1; }
    timeout 10 docker info >/dev/null 2>&1 || { log "DOCKER=docker but no Docker engine answers (docker info)"; exit 1; } ;;
  buildah)
    command -v buildah >/dev/null || { log "neither a Docker engine nor buildah: apt-get install buildah (or set DOCKER=docker)"; exit 1; }
    [[ $EUID -eq 0 ]] || { log "buildah with a private storage needs root here (or use DOCKER=docker)"; exit 1; } ;;
  *) log "DOCKER=$ENGINE: docker or buildah"; exit 1 ;;
esac
# A registries.conf of our own: short names (python:..., golang:...) mean docker.io, as for Docker.
mkdir -p "$CACHE_ROOT/containers"
printf 'unqualified-search-registries = ["docker.io"]\nshort-name-mode = "permissive"\n' >"$CACHE_ROOT/containers/registries.conf"
export CONTAINERS_REGISTRIES_CONF="$CACHE_ROOT/containers/registries.conf"
BA=(buildah --root "$CACHE_ROOT/containers/storage" --runroot "$CACHE_ROOT/containers/runroot"
    --storage-driver "${STORAGE_DRIVER:-overlay}")
log "engine=$ENGINE image=$IMAGE version=$VERSION"

image_id() {   # image_id REF: the local image's id (sha256:...), empty when absent
  if [[ "$ENGINE" == docker ]]; then
    docker image inspect --format '{{.Id}}' "$1" 2>/dev/null || true
  else
    local id
    id="$("${BA[@]}" inspect --type image --format '{{.FromImageID}}' "$1" 2>/dev/null)" || true
    [[ -z "$id" ]] || echo "sha256:${id#sha256:}"
  fi
}

# --- the base images -------------------------------------------------------------------------------
dockerfile_default() { sed -n "s/^ARG $1=\(.*\)$/\1/p" "$REPO/Dockerfile" | head -1; }

# resolve_base ARG: prints "ref id" of an image the build can use for ARG, pulling it when it is
# not local; prints nothing when it cannot be had (no registry reachable: probed with a short timeout)
resolve_base() {
  local ref id
  ref="$(dockerfile_default "$1")"
  id="$(image_id "$ref")"
  if [[ -z "$id" ]]; then
    if [[ "$ENGINE" == docker ]]; then
      timeout 120 docker pull -q "$ref" >&2 2>/dev/null || return 0
    else
      local qualified="$ref"
      [[ "${ref%%/*}" == *.* || "${ref%%/*}" == localhost* ]] || { [[ "$ref" == */* ]] && qualified="docker.io/$ref" || qualified="docker.io/library/$ref"; }
      timeout 15 skopeo inspect --raw --retry-times 0 "docker://$qualified" >/dev/null 2>&1 || return 0
      timeout 600 "${BA[@]}" pull -q "$ref" >/dev/null || return 0
    fi
    id="$(image_id "$ref")"
  fi
  [[ -z "$id" ]] || echo "$ref $id"
}

# The Debian + Python base: mmdebstrap minbase (python3, pip, venv, python-is-python3, ca-certificates),
# no PEP 668 marker (the Dockerfile pip-installs into the system Python, as on python:slim), no docs,
# man pages or apt lists (the packages' copyright files stay). Keyed by this recipe.
PY_BASE_RECIPE="bookworm minbase python3 python3-pip python3-venv python-is-python3 ca-certificates
  no-recommends no-EXTERNALLY-MANAGED no-docs $DEBIAN_MIRROR $DEBIAN_SECURITY_MIRROR $ARCH r1"
local_python_base() {
  local key ref tmp c
  key="$(echo "$PY_BASE_RECIPE" | sha256sum | cut -c1-12)"
  ref="localhost/pysched-base-python:bookworm-$key"
  if [[ -n "$(image_id "$ref")" ]]; then log "base $ref cached"; echo "$ref"; return; fi
  command -v mmdebstrap >/dev/null || { log "no registry reachable and no mmdebstrap to build a base: apt-get install mmdebstrap"; exit 1; }
  tmp="$(mktemp -d "$WORK/.tmp.XXXXXX")"
  log "building $ref with mmdebstrap (first run only; about a minute)"
  # shellcheck disable=SC2016  # "$1" is mmdebstrap's (the rootfs), not ours
  mmdebstrap --variant=minbase --architectures="$ARCH" \
    --include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates \
    --aptopt='APT::Install-Recommends "false"' \
    --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
    --customize-hook='find "$1"/usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete' \
    --customize-hook='find "$1"/usr/share/doc -mindepth 1 -type d -empty -delete' \
    --customize-hook='rm -rf "$1"/usr/share/man/* "$1"/usr/share/info/* "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/log/apt/* "$1"/var/log/dpkg.log "$1"/var/log/alternatives.log' \
    bookworm "$tmp/rootfs.tar" \
    "deb $DEBIAN_MIRROR bookworm main" "deb $DEBIAN_MIRROR bookworm-updates main" \
    "deb $DEBIAN_SECURITY_MIRROR bookworm-security main" >&2
  c="$("${BA[@]}" from scratch)"
  "${BA[@]}" add "$c" "$tmp/rootfs.tar" / >&2
  "${BA[@]}" config --cmd '["python3"]' --env LANG=C.UTF-8 \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --label "org.opencontainers.image.description=Debian bookworm minbase with Python 3 (pysched hack/image.sh)" "$c"
  "${BA[@]}" commit -q --rm "$c" "$ref" >/dev/null
  rm -rf "$tmp"
  echo "$ref"
}

# The Go toolchain image for the Dockerfile's cel stage: the Debian + Python base (for
# ca-certificates) plus Go from the module proxy, module golang.org/toolchain, which ships the
# release's archive (module zips keep no executable bits: they are set again here).
local_go_base() {
  local py_base="$1" want key ref json dir tmp c
  want="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$REPO/cmd/pysched-cel/go.mod")"
  if [[ "$(printf '%s\n%s\n' "$want" "$GO_VERSION" | sort -V | head -1)" != "$want" ]]; then
    log "GO_VERSION=$GO_VERSION is older than cmd/pysched-cel/go.mod's go $want"; exit 1
  fi
  key="$(echo "go$GO_VERSION $ARCH $(image_id "$py_base") r1" | sha256sum | cut -c1-12)"
  ref="localhost/pysched-base-go:$GO_VERSION-$key"
  if [[ -n "$(image_id "$ref")" ]]; then log "base $ref cached"; echo "$ref"; return; fi
  command -v go >/dev/null || { log "no registry reachable and no go command to fetch golang.org/toolchain"; exit 1; }
  log "building $ref: golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-$ARCH from the Go module proxy"
  json="$(cd "$WORK" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-$ARCH")"
  dir="$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$json")"
  [[ -x "$dir" || -d "$dir" ]] || { log "go mod download gave no Dir: $json"; exit 1; }
  tmp="$(mktemp -d "$WORK/.tmp.XXXXXX")"
  cp -r "$dir" "$tmp/go"
  chmod -R u+w,go-w "$tmp/go"
  chmod 0755 "$tmp/go/bin/"* "$tmp/go/pkg/tool/linux_$ARCH/"*
  c="$("${BA[@]}" from "$py_base")"
  "${BA[@]}" copy "$c" "$tmp/go" /usr/local/go >&2
  "${BA[@]}" config --env GOTOOLCHAIN=local --env GOPATH=/go \
    --env PATH=/usr/local/go/bin:/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
  "${BA[@]}" commit -q --rm "$c" "$ref" >/dev/null
  rm -rf "$tmp"
  echo "$ref"
}

# to_engine REF: make a base built with buildah visible to docker
to_engine() {
  [[ "$ENGINE" == docker && -z "$(image_id "$1")" ]] || return 0
  "${BA[@]}" push -q "$1" "docker-daemon:$1" >&2
}

step bases
BASE_ID="" GO_ID=""
if [[ -n "${BASE_IMAGE:-}" ]]; then
  BASE_ID="$(image_id "$BASE_IMAGE")"
else
  read -r BASE_IMAGE BASE_ID < <(resolve_base BASE_IMAGE; echo) || true
fi
if [[ -n "${GO_IMAGE:-}" ]]; then
  GO_ID="$(image_id "$GO_IMAGE")"
else
  read -r GO_IMAGE GO_ID < <(resolve_base GO_IMAGE; echo) || true
fi
if [[ -z "$BASE_IMAGE" || -z "$GO_IMAGE" ]]; then
  if [[ "$ENGINE" == docker ]] && ! command -v buildah >/dev/null; then
    log "the Dockerfile's base images cannot be pulled and local ones need buildah and mmdebstrap"; exit 1
  fi
  log "no registry reachable for the Dockerfile's base images: local ones"
  _saved_engine="$ENGINE"; ENGINE=buildah
  py_base="$(local_python_base)"
  if [[ -z "$BASE_IMAGE" ]]; then BASE_IMAGE="$py_base"; fi
  if [[ -z "$GO_IMAGE" ]]; then GO_IMAGE="$(local_go_base "$py_base")"; fi
  ENGINE="$_saved_engine"
  to_engine "$BASE_IMAGE"
  to_engine "$GO_IMAGE"
  BASE_ID="$(image_id "$BASE_IMAGE")"
  GO_ID="$(image_id "$GO_IMAGE")"
fi
log "BASE_IMAGE=$BASE_IMAGE ($BASE_ID) GO_IMAGE=$GO_IMAGE ($GO_ID)"

# --- the build context and the cache key -----------------------------------------------------------
step context
# The context holds only what the Dockerfile copies (its COPY sources, --from ones aside) and the
# Dockerfile, as git tracks them (working-tree contents: uncommitted edits count, untracked files
# do not), with normalised owners, modes and times, so the key is the content's.
mapfile -t SOURCES < <(awk '/^COPY / && !/--from/ { for (i = 2; i < NF; i++) if ($i !~ /^--/) print $i }' "$REPO/Dockerfile" | sort -u)
new_scratch
CTX_TMP="$SCRATCH"
(cd "$REPO" && git ls-files -z -- Dockerfile "${SOURCES[@]}" \
  | tar --null -T - --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --mode=go-w -cf "$CTX_TMP/context.tar")
mkdir "$CTX_TMP/context"
tar -C "$CTX_TMP/context" -xf "$CTX_TMP/context.tar"
# revision and created: the last commit that touched the context (unrelated commits change neither)
REVISION="$(git -C "$REPO" log -1 --format=%H -- Dockerfile "${SOURCES[@]}")"
EPOCH="$(git -C "$REPO" log -1 --format=%ct -- Dockerfile "${SOURCES[@]}")"
if [[ -n "$(git -C "$REPO" status --porcelain --untracked-files=no -- Dockerfile "${SOURCES[@]}")" ]]; then
  REVISION="$REVISION-dirty"
fi
CREATED="$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
LABELS=(
  "org.opencontainers.image.title=pysched"
  "org.opencontainers.image.description=pysched, a secondary Kubernetes scheduler in Python"
  "org.opencontainers.image.version=$VERSION"
  "org.opencontainers.image.revision=$REVISION"
  "org.opencontainers.image.source=$IMAGE_SOURCE"
  "org.opencontainers.image.created=$CREATED"
  "org.opencontainers.image.licenses=Apache-2.0"
)
KEY="$( { sha256sum <"$CTX_TMP/context.tar"; echo "$ENGINE $IMAGE $BASE_IMAGE $BASE_ID $GO_IMAGE $GO_ID $EPOCH"
          printf '%s\n' "${LABELS[@]}"; } | sha256sum | cut -c1-16)"
CACHED="$WORK/out/$KEY"
log "key=$KEY revision=$REVISION created=$CREATED"

# --- build and export ------------------------------------------------------------------------------
if [[ -s "$CACHED/image.oci.tar" && -s "$CACHED/image.digest" && -s "$CACHED/.config-digest" ]]; then
  step reuse
  log "cached: $CACHED"
  config_digest="$(cat "$CACHED/.config-digest")"
  if [[ "$(image_id "$IMAGE")" != "$config_digest" ]]; then   # pruned or retagged since: load it again
    log "tagging $IMAGE from the archive"
    if [[ "$ENGINE" == docker ]]; then
      docker load -q -i "$CACHED/image.oci.tar" >&2
    else
      "${BA[@]}" pull -q "oci-archive:$CACHED/image.oci.tar" >/dev/null
      "${BA[@]}" tag "${config_digest#sha256:}" "$IMAGE"
    fi
  fi
else
  step build
  # The CA bundle over the image's: Debian's pip and go read it. PyPI's pip (the Dockerfile upgrades
  # to it) reads the system store too since 24.2 (truststore; its own certifi fails here, checked),
  # and this pip.conf, for the build only, points any pip at it whatever its version.
  PIP_CONF="$CTX_TMP/pip.conf"
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$PIP_CONF"
  BUILD_ARGS=(--build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "GO_IMAGE=$GO_IMAGE" -t "$IMAGE" -f "$CTX_TMP/context/Dockerfile")
  for l in "${LABELS[@]}"; do BUILD_ARGS+=(--label "$l"); done
  if [[ "$ENGINE" == docker ]]; then
    # BuildKit's SOURCE_DATE_EPOCH: the image's created time (and, with a recent BuildKit, its files')
    docker build --build-arg "SOURCE_DATE_EPOCH=$EPOCH" "${BUILD_ARGS[@]}" "$CTX_TMP/context" >&2
  else
    # --layers: an unchanged stage (the Go helper) is reused from the private storage
    "${BA[@]}" bud --layers --isolation chroot --network host --timestamp "$EPOCH" \
      -v "$CA_BUNDLE:/etc/ssl/certs/ca-certificates.crt:ro" -v "$PIP_CONF:/etc/pip.conf:ro" \
      "${BUILD_ARGS[@]}" "$CTX_TMP/context" >&2
  fi
  step export
  new_scratch
  OUT_TMP="$SCRATCH"
  if [[ "$ENGINE" == docker ]]; then
    skopeo copy -q "docker-daemon:$IMAGE" "oci:$OUT_TMP/layout:$IMAGE" >&2
  else
    "${BA[@]}" push -q "$IMAGE" "oci:$OUT_TMP/layout:$IMAGE" >&2
  fi
  (cd "$REPO" && "$PY" -m pysched_dev.ociarchive "$OUT_TMP/layout" "$IMAGE" "$EPOCH" "$OUT_TMP")
  rm -rf "$OUT_TMP/layout"
  mkdir -p "$WORK/out"
  rm -rf "$CACHED"
  mv "$OUT_TMP" "$CACHED"
  chmod 0755 "$CACHED"
  # buildah's storage keeps every build's layers (--layers: the next build reuses them) and the
  # untagged images of earlier builds: past PYSCHED_IMAGE_STORAGE_GB (default 8) the untagged ones go
  # (the next build then compiles its wheels again)
  if [[ "$ENGINE" == buildah ]]; then
    used_gb=$(( $(du -sk "$CACHE_ROOT/containers/storage" 2>/dev/null | cut -f1) / 1048576 ))
    if (( used_gb > ${PYSCHED_IMAGE_STORAGE_GB:-8} )); then
      log "buildah storage at ${used_gb} GB: removing untagged images"
      "${BA[@]}" rmi --prune >&2 || log "buildah rmi --prune failed (storage left as it is)"
    fi
  fi
  # keep the three newest results (some 200 MB each)
  find "$WORK/out" -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p\n' | sort -rn | tail -n +4 | cut -d' ' -f2- \
    | while read -r old; do log "removing the old result $old"; rm -rf "$old"; done
fi
log "digest=$(cat "$CACHED/image.digest") size_mb=$(($(stat -c %s "$CACHED/image.oci.tar") / 1048576))"

# --- scan and SBOM (regenerated when their tools change) -------------------------------------------
TOOLS_KEY="$(cat "$REPO/pysched_dev/imagescan.py" "$REPO/pysched_dev/ocirootfs.py" "$REPO/pysched_dev/imagesbom.py" \
  "$REPO/pysched_dev/gobuildinfo.py" | sha256sum | cut -c1-16) $("$PY" -m pip --disable-pip-version-check list 2>/dev/null | grep -i '^cyclonedx' | tr -s ' ' | tr '\n' ' ')"
if [[ ! -s "$CACHED/scan.json" || ! -s "$CACHED/sbom.cdx.json" || "$(cat "$CACHED/.tools" 2>/dev/null)" != "$TOOLS_KEY" ]]; then
  step scan
  (cd "$REPO" && "$PY" -m pysched_dev.imagescan "$CACHED/image.oci.tar" -o "$CACHED/scan.json.tmp")
  mv "$CACHED/scan.json.tmp" "$CACHED/scan.json"
  step sbom
  new_scratch
  SBOM_TMP="$SCRATCH"
  (cd "$REPO" && SOURCE_DATE_EPOCH="$EPOCH" "$PY" -m pysched_dev.imagesbom "$CACHED/image.oci.tar" \
    --workdir "$SBOM_TMP" -o "$CACHED/sbom.cdx.json.tmp")
  mv "$CACHED/sbom.cdx.json.tmp" "$CACHED/sbom.cdx.json"
  echo "$TOOLS_KEY" >"$CACHED/.tools"
fi

OUT="$CACHED"
if [[ -n "${IMAGE_OUT:-}" ]]; then
  step copy
  mkdir -p "$IMAGE_OUT"
  OUT="$(cd "$IMAGE_OUT" && pwd)"
  for f in image.oci.tar image.digest sbom.cdx.json scan.json; do cp -f "$CACHED/$f" "$OUT/$f"; done
fi
step finish
log "total seconds=$((SECONDS - T0)) out=$OUT"
echo "$OUT"
