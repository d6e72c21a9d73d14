#!/usr/bin/env bash
# Obtain qemu-user's emulators (qemu-aarch64-static, qemu-x86_64-static), to run the release's
# foreign-architecture pysched-cel (tests/e2e/test_release.py): QEMU_USER_DIR when set, else a cache
# outside the repository, else Debian's qemu-user-static package downloaded (`apt-get download`,
# no root needed) and unpacked into that cache. Nothing is installed: installing the package would
# put binfmt.d files on the host, which a systemd host registers at boot for every foreign binary.
#
# Prints the directory holding the emulators on stdout (last line); progress goes to stderr.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh" qemu-user

if [[ -n "${QEMU_USER_DIR:-}" ]]; then
  [[ -x "$QEMU_USER_DIR/qemu-aarch64-static" ]] || { log "QEMU_USER_DIR=$QEMU_USER_DIR has no qemu-aarch64-static"; exit 1; }
  echo "$QEMU_USER_DIR"
  exit 0
fi
command -v apt-get >/dev/null || { log "no apt-get: set QEMU_USER_DIR to a directory with qemu-aarch64-static"; exit 1; }

mkdir -p "$CACHE_ROOT"
version="$(apt-cache policy qemu-user-static 2>/dev/null | sed -n 's/^ *Candidate: *//p')"
[[ -n "$version" && "$version" != "(none)" ]] || { log "apt knows no qemu-user-static (apt-get update?)"; exit 1; }
BIN_DIR="$CACHE_ROOT/bin/qemu-user-${version//[^A-Za-z0-9.+-]/_}"
if [[ ! -x "$BIN_DIR/qemu-aarch64-static" ]]; then
  tmp="$(mktemp -d "$CACHE_ROOT/.qemu-user.XXXXXX")"
  _HACK_BUILD_DIRS+=("$tmp")
  log "downloading qemu-user-static $version (Debian) into $BIN_DIR"
  (cd "$tmp" && apt-get download -q "qemu-user-static=$version" >&2)
  dpkg-deb -x "$tmp"/qemu-user-static_*.deb "$tmp/root"
  mkdir -p "$tmp/out"
  cp "$tmp/root/usr/bin/qemu-aarch64-static" "$tmp/root/usr/bin/qemu-x86_64-static" "$tmp/out/"
  rm -rf "$BIN_DIR"
  mkdir -p "$(dirname "$BIN_DIR")"
  mv "$tmp/out" "$BIN_DIR"
fi
echo "$BIN_DIR"
