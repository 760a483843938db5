#!/usr/bin/env bash
# `make test` opens the built book in headless Chromium (tests/test_browser.py). With no
# Chromium on PATH: as root, install Debian's `chromium`; as anyone else, stop at once
# with one line naming the command to run.
set -euo pipefail
INSTALL="apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium"

have_chromium() {  # the names tests/test_browser.py looks for
  local name
  for name in chromium chromium-browser google-chrome chrome; do
    command -v "$name" >/dev/null 2>&1 && return 0
  done
  return 1
}

have_chromium && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "make test needs Chromium for its browser test: run \`sudo apt-get update && sudo apt-get install -y chromium\`, then make test again." >&2
  exit 1
fi
echo "Chromium is missing; installing Debian's chromium: $INSTALL" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
have_chromium || { echo "apt-get installed no chromium; install a Chromium by hand and rerun make test." >&2; exit 1; }
