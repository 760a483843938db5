#!/usr/bin/env bash
# The virtualenv every `make` target uses: exactly the pinned lines of requirements.txt,
# then this project in editable mode. Usage: tools/make_venv.sh VENV PYTHON
#
# uv (pinned in requirements.txt as well) installs the ~180 pinned packages in seconds
# where pip takes 40-80 s. torch is the one package uv must not pick by itself: the
# index's build of the pinned version is a CUDA one of several GB, while pip's settings on
# these machines point at the CPU wheel on disk. So pip picks torch's file, as it always
# did, and uv installs that file with the rest. If uv cannot be had, pip installs it all.
set -euo pipefail
VENV=${1:-.venv}
PYTHON=${2:-python3}
PY=$VENV/bin/python

test -x "$PY" || "$PYTHON" -m venv "$VENV"
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT

with_uv() {
  "$PY" -m pip install -q "$(grep -E '^uv==' requirements.txt)" &&
    "$PY" -m pip download -q --no-deps -d "$wheels" "$(grep -E '^torch==' requirements.txt)" &&
    "$VENV/bin/uv" pip install -q --python "$PY" -r requirements.txt "$wheels"/torch-*.whl
}

if ! with_uv; then
  echo "uv could not install requirements.txt; installing it with pip instead" >&2
  # --no-compile: pip would byte-compile every file it installs (a minute on one core);
  # Python compiles the few the tests import on first import instead.
  "$PY" -m pip install -q --no-compile -r requirements.txt
fi
"$PY" -m pip install -q --no-deps --no-build-isolation -e .
