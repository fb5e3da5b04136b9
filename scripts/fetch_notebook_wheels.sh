#!/usr/bin/env bash
# Download the wheels that executing the notebooks needs (nbclient, nbformat, ipykernel and all
# their dependencies) for CPython 3.12 on x86-64 Linux (manylinux), into a git-ignored folder
# (default wheels/), so that a machine without network (the H200 image: Python 3.12, no nbclient,
# no ipykernel) can install them with `pip install --no-index --find-links wheels/ ...`, which
# scripts/run_notebooks.sh does by itself when the folder exists.
#
#   scripts/fetch_notebook_wheels.sh                   # into wheels/
#   WHEELS_DIR=/tmp/w scripts/fetch_notebook_wheels.sh # elsewhere
#   scripts/fetch_notebook_wheels.sh matplotlib        # extra packages on top of the three
#
# Markers (python_version ...) are evaluated by the interpreter that runs pip, so a Python 3.12
# is used when one is found (python3.12 on PATH, pyenv); otherwise python3, with a warning.
# Wheels only (--only-binary=:all:): nothing is built on the target.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${WHEELS_DIR:-wheels}
PYVER=${WHEELS_PYTHON_VERSION:-3.12}
PACKAGES=(nbclient nbformat ipykernel "$@")

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in "python$PYVER" "$HOME/.pyenv/versions/$PYVER"*/bin/python python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -m pip --version >/dev/null 2>&1; then
      PY=$cand
      break
    fi
  done
fi
have=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$have" != "$PYVER" ]; then
  echo "warning: pip runs under Python $have, not $PYVER: environment markers are evaluated for $have" >&2
fi

mkdir -p "$DEST"
echo "== pip download (${PACKAGES[*]}) for cp${PYVER/./} manylinux x86_64 into $DEST/ (pip of $PY, Python $have)"
"$PY" -m pip download -q --disable-pip-version-check \
  --only-binary=:all: --implementation cp --python-version "$PYVER" \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
  -d "$DEST" "${PACKAGES[@]}"

# One version of each project: two would stop a --no-index install.
dups=$(ls "$DEST"/*.whl | xargs -n1 basename | cut -d- -f1 | tr 'A-Z-' 'a-z_' | sort | uniq -d)
if [ -n "$dups" ]; then
  echo "error: several versions of: $dups (empty $DEST/ and fetch again)" >&2
  exit 1
fi
n=$(ls "$DEST"/*.whl | wc -l)
size=$(du -sh "$DEST" | cut -f1)
echo "== $n wheels, $size in $DEST/"
ls "$DEST"
