#!/usr/bin/env bash
# The built book (_build/html) as the only commit of the gh-pages branch, by ghp-import
# (pinned in requirements.txt). It is pushed only when the repository has the remote;
# otherwise the branch stays local and this says how to push it.
# Usage: tools/publish.sh BIN [REMOTE]   (BIN: the virtualenv's bin folder)
set -euo pipefail
BIN=$1
REMOTE=${2:-origin}
HTML=_build/html

if [ ! -f "$HTML/index.html" ]; then
  echo "publish: $HTML/index.html is missing: build the book first (make book)" >&2
  exit 1
fi
# -n: a .nojekyll file, or GitHub Pages would hide the book's _static/ folder. The branch
# holds one commit, the latest book: -o drops the remote's history, and the local branch is
# deleted first because ghp-import's -o only looks at the remote's.
message="The book, built from $(git rev-parse --short HEAD)"
git update-ref -d refs/heads/gh-pages 2> /dev/null || true
if git remote get-url "$REMOTE" > /dev/null 2>&1; then
  "$BIN/ghp-import" -n -o -f -p -r "$REMOTE" -m "$message" "$HTML"
  echo "publish: gh-pages pushed to $REMOTE ($(git remote get-url "$REMOTE"))"
else
  "$BIN/ghp-import" -n -o -m "$message" "$HTML"
  echo "publish: gh-pages updated here; no remote '$REMOTE' is configured, so nothing was pushed" \
       "(git remote add $REMOTE URL, then make publish or git push -f $REMOTE gh-pages)"
fi
