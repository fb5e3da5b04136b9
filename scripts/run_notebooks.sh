#!/usr/bin/env bash
# Execute notebooks with nbclient and write their outputs into the .ipynb.
#
#   scripts/run_notebooks.sh                          # every notebooks/*.ipynb, in place
#   scripts/run_notebooks.sh notebooks/a.ipynb ...    # these, in place
#   scripts/run_notebooks.sh --out DIR [notebooks]    # executed copies into DIR (CI); the
#                                                     # originals are left as they are
#
# Each notebook runs in a fresh python3 kernel of this interpreter (PYTHON, default python3),
# with its working directory set to where its executed copy is written (notebooks/ in place,
# DIR with --out), so the figures it saves (PNG) land beside it. HSMA_TRSM_REPO is set to the
# repository root and the root is put first on PYTHONPATH, so `import hsma_trsm` takes this
# checkout's build (build it first: scripts/dev.sh test, or pip install --no-build-isolation -e .).
#
# Missing nbclient / nbformat / ipykernel (and matplotlib, scikit-learn, which the notebooks
# use) are installed first: from wheels/ (scripts/fetch_notebook_wheels.sh) with --no-index when
# that folder exists, e.g. on a machine without network; else from the package index.
#
# NOTEBOOK_TIMEOUT: seconds one cell may take (default 600). A cell that raises or times out
# fails the script (after the other notebooks ran); the partly executed notebook is written as
# NAME.failed.ipynb beside where the output would have gone.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
WHEELS=${WHEELS_DIR:-$ROOT/wheels}
OUTDIR=
nbs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUTDIR=$2; shift 2 ;;
    --out=*) OUTDIR=${1#--out=}; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) nbs+=("$1"); shift ;;
  esac
done
if [ ${#nbs[@]} -eq 0 ]; then
  shopt -s nullglob
  for nb in "$ROOT"/notebooks/*.ipynb; do
    [[ $nb == *.failed.ipynb ]] || nbs+=("$nb")
  done
  shopt -u nullglob
fi
[ ${#nbs[@]} -gt 0 ] || { echo "run_notebooks: no notebooks found" >&2; exit 1; }

pip_install() {
  if [ -d "$WHEELS" ] && ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    echo "== installing $* from $WHEELS (--no-index)"
    if "$PY" -m pip install -q --disable-pip-version-check --no-index --find-links "$WHEELS" "$@"; then
      return 0
    fi
    echo "run_notebooks: $WHEELS does not hold $* for this Python; trying the package index" >&2
  else
    echo "== installing $* from the package index"
  fi
  "$PY" -m pip install -q --disable-pip-version-check "$@" || {
    echo "run_notebooks: could not install $* (no network? fetch wheels with scripts/fetch_notebook_wheels.sh and carry wheels/)" >&2
    exit 1
  }
}

missing=()
for mod in nbclient:nbclient nbformat:nbformat ipykernel:ipykernel matplotlib:matplotlib sklearn:scikit-learn; do
  "$PY" -c "import ${mod%%:*}" 2>/dev/null || missing+=("${mod##*:}")
done
[ ${#missing[@]} -eq 0 ] || pip_install "${missing[@]}"

export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export HSMA_TRSM_REPO=$ROOT
"$PY" -c "import hsma_trsm" 2>/dev/null || {
  echo "run_notebooks: hsma_trsm does not import from $ROOT (build it first: scripts/dev.sh test, or" \
       "$PY -m pip install --no-build-isolation -e .)" >&2
  "$PY" -c "import hsma_trsm" || true
  exit 1
}

# A private python3 kernel spec for this interpreter, first on JUPYTER_PATH, so no kernel
# registered elsewhere (another Python) is picked; Jupyter/IPython state stays in a temp dir.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" -m ipykernel install --prefix "$tmp/prefix" --name python3 >/dev/null 2>&1 \
  || { echo "run_notebooks: could not register the python3 kernel" >&2; exit 1; }
export JUPYTER_PATH="$tmp/prefix/share/jupyter" JUPYTER_RUNTIME_DIR="$tmp/runtime" IPYTHONDIR="$tmp/ipython"

[ -z "$OUTDIR" ] || mkdir -p "$OUTDIR"
"$PY" - "${OUTDIR:-}" "${NOTEBOOK_TIMEOUT:-600}" "${nbs[@]}" <<'EOF'
import os
import re
import sys
import time

import nbformat
from nbclient import NotebookClient

outdir, timeout, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
failed = []
for path in paths:
    src = os.path.abspath(path)
    dst = os.path.join(os.path.abspath(outdir), os.path.basename(src)) if outdir else src
    cwd = os.path.dirname(dst)
    nb = nbformat.read(src, as_version=4)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    current = [None]  # index of the cell being executed

    def on_cell_execute(cell, cell_index):
        current[0] = cell_index

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            on_cell_execute=on_cell_execute, resources={"metadata": {"path": cwd}})
    print(f"== executing {path} (cell timeout {timeout} s, cwd {cwd})", flush=True)
    start = time.time()
    try:
        client.execute()
    except Exception as exc:  # a cell's error, a cell timeout, a dead or unstartable kernel
        bad = dst[: -len(".ipynb")] + ".failed.ipynb"
        nbformat.write(nb, bad)
        i = current[0]
        if i is None:
            where = "before the first cell"
        else:
            first = (nb.cells[i].source.strip().splitlines() or [""])[0][:60]
            where = f"cell {i + 1} of {len(nb.cells)} ({first!r})"
        print(f"FAILED: {path}: {where} ({type(exc).__name__}) after {time.time() - start:.1f} s; "
              f"partly executed notebook: {bad}\n" + re.sub(r"\x1b\[[0-9;]*m", "", str(exc)),
              file=sys.stderr, flush=True)
        failed.append(path)
        continue
    nbformat.write(nb, dst)
    print(f"ok: {path} -> {dst} in {time.time() - start:.1f} s", flush=True)

if failed:
    print(f"run_notebooks: {len(failed)} of {len(paths)} notebooks failed: {' '.join(failed)}",
          file=sys.stderr)
    sys.exit(1)
print(f"run_notebooks: {len(paths)} notebooks executed")
EOF
