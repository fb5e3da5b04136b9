#!/usr/bin/env bash
# The README's two commands, with all set-up included, for a fresh machine:
#   scripts/dev.sh test    set up, build the extension in place, run the tests (GPU tests skip without a GPU)
#   scripts/dev.sh bench   the same set-up, then the benchmark against torch (no GPU: it says so, runs the CPU path)
# Set-up happens in a project-local virtual environment, .venv (HSMA_VENV to move it), created with the system's
# site packages visible so that an installed torch (the GPU image's 2.11 + CUDA) is reused; without one,
# torch==2.13.0 is installed into it (our machines and CI take a CPU build from local disk). PYTHON picks the
# interpreter that creates the venv. The build is `setup.py build_ext --inplace` with ninja, so a second call
# recompiles only what changed; the repository is put on the venv's path by a .pth file.
# Everything after the subcommand is passed to pytest / the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${HSMA_VENV:-$ROOT/.venv}
PY=$VENV/bin/python
cmd=${1:-test}
shift || true

pip_install() { "$PY" -m pip install -q --disable-pip-version-check "$@"; }

setup() {
  if [ ! -x "$PY" ]; then
    echo "== creating $VENV (system site packages visible)"
    "${PYTHON:-python3}" -m venv --system-site-packages "$VENV"
  fi
  if ! "$PY" -c "import torch" 2>/dev/null; then
    echo "== installing torch==2.13.0 into $VENV"
    pip_install torch==2.13.0
  fi
  local missing=()
  for mod in numpy:numpy scipy:scipy pytest:pytest pytest_timeout:pytest-timeout sklearn:scikit-learn \
             tqdm:tqdm ninja:ninja setuptools:setuptools wheel:wheel; do
    "$PY" -c "import ${mod%%:*}" 2>/dev/null || missing+=("${mod##*:}")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing ${missing[*]} into $VENV"
    pip_install "${missing[@]}"
  fi
  # The real clients the switch's tests run (tests/test_switch.py; they skip where these are missing),
  # installed against the torch already there: the pin keeps pip from bringing another torch.
  if ! "$PY" -c "import gpytorch, botorch, linear_operator" 2>/dev/null; then
    local torch_version
    torch_version=$("$PY" -c "import torch; print(torch.__version__)")
    echo "== installing gpytorch, botorch (and linear_operator) into $VENV, keeping torch $torch_version"
    pip_install gpytorch botorch linear_operator "torch==$torch_version"
  fi
  local site
  site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  [ -f "$site/hsma_trsm_dev.pth" ] || echo "$ROOT" >"$site/hsma_trsm_dev.pth"
  echo "== building hsma_trsm in place (incremental; the first build takes a few minutes; log: build.log)"
  # ninja's [n/N] lines, one per compiled file, as progress; the full output goes to build.log.
  if ! "$PY" setup.py build_ext --inplace 2>&1 | tee build.log |
      sed -un 's#^\[\([0-9]*/[0-9]*\)\] .* -c [^ ]*/\([^ /]*\.c[pu]*\) .*#   [\1] \2#p'; then
    tail -n 60 build.log
    echo "build failed (log: build.log)"
    exit 1
  fi
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
