#!/usr/bin/env bash
# Print the path of a headless-capable Chromium for the HTML report test, installing Debian's
# `chromium` package when it is missing and we may (root with apt-get). Prints nothing and exits
# non-zero when no browser can be had; `make test` then fails the report test instead of skipping it.
set -euo pipefail
for candidate in "${PYSCHED_CHROMIUM:-}" chromium chromium-browser google-chrome; do
  if [[ -n "$candidate" ]] && command -v "$candidate" >/dev/null 2>&1; then
    command -v "$candidate"
    exit 0
  fi
done
if [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null 2>&1; then
  echo "hack/chromium.sh: installing Debian's chromium package" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2
  command -v chromium
  exit 0
fi
echo "hack/chromium.sh: no Chromium found and cannot install one (need root and apt-get)" >&2
exit 1
