#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for the console's browser test, and prints
# the path of its binary.
#
#   scripts/chromium.sh          install when missing (apt-get; as root or through sudo), print the path
#   scripts/chromium.sh path     print the path, or fail with one line when it is not installed
set -euo pipefail

die() { echo "chromium: $*" >&2; exit 1; }

find_bin() {
  local b
  for b in chromium chromium-browser; do
    command -v "$b" 2>/dev/null && return 0
  done
  return 1
}

install() {
  find_bin && return 0
  command -v apt-get >/dev/null 2>&1 || die "chromium is missing and apt-get is not available: install Chromium and put it on PATH"
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "chromium is missing: run 'apt-get install -y chromium' as root"
    sudo=(sudo -n)
  fi
  # Test packages may start at once: one installs, the others wait for it.
  exec 9>"${TMPDIR:-/tmp}/ssodir-chromium.lock"
  flock 9
  find_bin && return 0
  echo "chromium: installing Debian's chromium package" >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get update -qq >&2 \
    || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium >&2 \
    || die "apt-get install chromium failed"
  find_bin || die "chromium was installed but is not on PATH"
}

case "${1:-install}" in
  install) install ;;
  path) find_bin || die "not installed: run scripts/chromium.sh" ;;
  *) die "usage: scripts/chromium.sh [install|path]" ;;
esac
