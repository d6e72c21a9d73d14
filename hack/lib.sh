# shellcheck shell=bash
# Sourced by the hack/*.sh scripts that obtain a binary (or a directory of them) built with Go:
#
#   source "$(dirname "$0")/lib.sh" NAME     # NAME prefixes every progress line on stderr
#
# Each such script takes a binary from an environment variable when one is set (use_override),
# else from a cache outside the repository keyed by what was built (a version, a source hash),
# else builds it once with the machine's Go toolchain into that cache (go_build_into), and prints
# the path on stdout. stdout carries that path only, as callers read it with `X="$(hack/foo.sh)"`
# or take its last line (pysched_dev.devcluster.hack_output): everything else goes to stderr.
#
# Not executable on its own, and it sets no shell options: each script keeps `set -euo pipefail`
# itself, before sourcing this, and go_build_into relies on errexit to stop at a failed build.
# It sets the EXIT trap (removing unfinished build directories): a script must not set its own.

HACK_NAME="${1:?usage: source hack/lib.sh NAME}"

# The cache root: PYSCHED_CACHE, else $XDG_CACHE_HOME/pysched, else ~/.cache/pysched. The cached
# binaries live in $CACHE_ROOT/bin/<name-and-version>, module scratch directories in
# $CACHE_ROOT/src. CI caches ~/.cache/pysched across runs, so these names must not change
# lightly: a renamed path rebuilds (control plane: some twenty minutes).
# shellcheck disable=SC2034  # read by the scripts that source this
CACHE_ROOT="${PYSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pysched}"

log() { echo "$HACK_NAME: $*" >&2; }

# use_override VAR: when $VAR is set, it names the binary to use: print it and exit 0 (exit 1 when
# it is not an executable file), so nothing is built or even looked up in the cache.
use_override() {
  local var="$1"
  [[ -n "${!var:-}" ]] || return 0
  [[ -x "${!var}" ]] || { log "$var=${!var} is not an executable file"; exit 1; }
  echo "${!var}"
  exit 0
}

# Build directories still to remove: a build that fails exits the script (errexit) from inside
# go_build_into, so the EXIT trap, not the function, has to clean up after it.
_HACK_BUILD_DIRS=()
trap 'rm -rf ${_HACK_BUILD_DIRS[@]+"${_HACK_BUILD_DIRS[@]}"}' EXIT

# go_build_into DIR BUILD_FN MESSAGE NAME...
#   Builds NAME... (files or directories) and puts them into DIR, each replacing what was there:
#   - exits 1 with a message on stderr when there is no Go toolchain;
#   - creates DIR and a fresh build directory inside it, DIR/.build.XXXXXX (absolute path; on the
#     same file system as DIR, so the final rename is atomic);
#   - logs MESSAGE (unless empty), then runs `BUILD_FN BUILD_DIR NAME...` with its stdout sent to
#     stderr; BUILD_FN must leave every NAME in BUILD_DIR and may use the build directory for
#     anything else (a scratch go.mod...);
#   - renames each NAME from BUILD_DIR into DIR, logging "built DIR/NAME", and removes BUILD_DIR.
#   When BUILD_FN fails the script exits with its status (errexit) and the EXIT trap removes
#   BUILD_DIR: nothing half-written ever sits at a path the scripts treat as cached.
#   BUILD_FN runs in this shell, not a subshell (it may set variables; a `cd` should be in a
#   subshell of its own). Call go_build_into as a plain command or as the last one of an `||`
#   list, never as an `if` condition or before `||`: bash turns errexit off in there, and a
#   failing build would then go on.
go_build_into() {
  local dir="$1" fn="$2" message="$3" tmp name
  shift 3
  if ! command -v go >/dev/null; then
    local verb=is
    (( $# == 1 )) || verb=are
    log "go toolchain not found and $* $verb not cached in $dir"
    exit 1
  fi
  mkdir -p "$dir"
  tmp="$(mktemp -d "$dir/.build.XXXXXX")"
  tmp="$(cd "$tmp" && pwd)"   # absolute: BUILD_FN may cd elsewhere (PYSCHED_CACHE may be relative)
  _HACK_BUILD_DIRS+=("$tmp")
  [[ -z "$message" ]] || log "$message"
  "$fn" "$tmp" "$@" >&2
  for name in "$@"; do
    [[ -e "$tmp/$name" ]] || { log "the build left no $name"; exit 1; }
    # a directory is replaced (rename(2) will not move one over a non-empty directory); a file is
    # renamed over the old one atomically
    if [[ -d "$tmp/$name" ]]; then rm -rf "${dir:?}/$name"; fi
    mv "$tmp/$name" "$dir/$name"
    log "built $dir/$name"
  done
  rm -rf "$tmp"
}

# k8s_module SRC VERSION IMPORT...: makes SRC a Go module of our own that requires
# k8s.io/kubernetes vVERSION (its staging modules, which the upstream go.mod replaces with
# ./staging/src/..., replaced by their published v0.<minor>.<patch>) and imports each IMPORT (a
# package path under k8s.io/kubernetes, e.g. cmd/kubelet) from a tools.go, then tidies it. Each
# script keeps its own SRC: two scripts sharing one would rewrite each other's tools.go.
k8s_module() {
  local src="$1" version="$2" upstream_mod pkg
  shift 2
  mkdir -p "$src"
  upstream_mod="$(cd "$src" && GOFLAGS='' go mod download -json "k8s.io/kubernetes@v${version}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  [[ -f "$upstream_mod" ]] || { log "could not download k8s.io/kubernetes@v${version}"; exit 1; }
  {
    echo "module pysched.local/controlplane"
    echo
    echo "go $(sed -n 's/^go \([0-9.]*\).*/\1/p' "$upstream_mod")"
    echo
    echo "require k8s.io/kubernetes v${version}"
    echo
    echo "replace ("
    sed -n 's#^\s*\(k8s.io/[^ ]*\) => ./staging/src/.*#\1#p' "$upstream_mod" | while read -r m; do
      echo "	$m => $m v0.${version#*.}"
    done
    echo ")"
  } > "$src/go.mod"
  {
    echo "//go:build tools"
    echo
    echo "package tools"
    echo
    echo "import ("
    for pkg in "$@"; do
      echo "	_ \"k8s.io/kubernetes/$pkg\""
    done
    echo ")"
  } > "$src/tools.go"
  (cd "$src" && { go mod tidy -e >&2 2>&1 || true; })
}

# k8s_build SRC VERSION OUT PKG: builds k8s.io/kubernetes/PKG (a main package) in the module
# k8s_module made in SRC into the file OUT, stamped with VERSION as `--version` prints it.
k8s_build() {
  local src="$1" version="$2" out="$3" pkg="$4"
  (cd "$src" && go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v${version} -X k8s.io/client-go/pkg/version.gitVersion=v${version}" -o "$out" "k8s.io/kubernetes/$pkg")
}
