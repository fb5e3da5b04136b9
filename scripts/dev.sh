#!/usr/bin/env bash
# The two README commands, with all set-up included, for a fresh machine:
#   scripts/dev.sh test    install what is missing, build the extension in place, run the tests
#   scripts/dev.sh bench   the same set-up, then the benchmark against torch (main job)
# Set-up: torch is taken as installed when importable (the H200 image has 2.11 + CUDA 13.0);
# otherwise torch==2.13.0 (the CPU build our machines and CI carry on local disk) is installed.
# Everything after the subcommand is passed to pytest / the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
cmd=${1:-test}
shift || true

pip_install() { "$PY" -m pip install -q --disable-pip-version-check "$@"; }

setup() {
  if ! "$PY" -c "import torch" 2>/dev/null; then
    echo "== installing torch==2.13.0"
    pip_install torch==2.13.0
  fi
  local missing=()
  for mod in numpy:numpy scipy:scipy pytest:pytest pytest_timeout:pytest-timeout sklearn:scikit-learn \
             tqdm:tqdm ninja:ninja setuptools:setuptools; do
    "$PY" -c "import ${mod%%:*}" 2>/dev/null || missing+=("${mod##*:}")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing ${missing[*]}"
    pip_install "${missing[@]}"
  fi
  echo "== building hsma_trsm (in place)"
  "$PY" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e . \
    >build.log 2>&1 || { tail -n 60 build.log; echo "build failed (full log: build.log)"; exit 1; }
}

case "$cmd" in
  test)
    setup
    exec "$PY" -m pytest -q tests "$@"
    ;;
  bench)
    setup
    exec "$PY" -m benchmarks "$@"
    ;;
  *)
    echo "usage: scripts/dev.sh test|bench [args...]" >&2
    exit 2
    ;;
esac
