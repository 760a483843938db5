#!/usr/bin/env bash
# The text task reads Jane Austen's six novels from Debian's r-cran-janeaustenr (R is not
# needed): fetch the package with apt-get, unpack it with dpkg-deb, and let
# `python -m llamanat_core.data.corpus unpack` write the novels, checked against the SHA-256 each
# one has in llamanat_core/data/corpus.py, and keep the .deb beside them (the tests read the
# real R database from it). Nothing to do when they are there and right; where
# apt cannot fetch (no apt, or not root and the package lists are empty) stop at once with
# the one command to run. Usage: ensure_corpus.sh PYTHON
set -euo pipefail
PY=${1:?usage: ensure_corpus.sh PYTHON}
PACKAGE="r-cran-janeaustenr=1.0.0-1"
"$PY" -m llamanat_core.data.corpus check 2>/dev/null && exit 0
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
  echo "the text corpus comes from Debian's r-cran-janeaustenr, and this machine has no apt-get/dpkg-deb: on a Debian machine run \`make corpus\`, then copy .corpus/ here." >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fetch() { (cd "$work" && apt-get download -qq "$PACKAGE" >/dev/null 2>&1); }
if ! fetch; then
  if [ "$(id -u)" != 0 ]; then
    echo "apt-get could not download $PACKAGE: run \`sudo apt-get update\`, then make corpus again." >&2
    exit 1
  fi
  apt-get update -qq
  fetch || { echo "apt-get could not download $PACKAGE even after apt-get update." >&2; exit 1; }
fi
dpkg-deb -x "$work"/r-cran-janeaustenr_*.deb "$work/x"
"$PY" -m llamanat_core.data.corpus unpack "$work/x/usr/lib/R/site-library/janeaustenr/data/Rdata" \
  "$work"/r-cran-janeaustenr_*.deb
