#!/usr/bin/env bash
# One full run on a GPU machine (the H200): build (sm_90, all cores), the whole test suite on
# the GPU, the benchmark against torch; logs and CSVs go to the folder given (default $OUT, else
# ./gpu-out). STAGES (default "build tune test sanitize bench") selects steps; PYTEST_ARGS adds pytest
# options and BENCH_ARGS / TUNE_ARGS benchmark / tuner options (all split at spaces: no quoting),
# PYTEST_K one -k expression (spaces allowed). HSMA_BENCH_GIT=<revision> names the commit in the
# result files; give the literal hash on the device machine, whose copy of .git is stale (there
# `git rev-parse HEAD` names an old commit). Opt-in stage paths: the path tuner (its table, like the block-size
# table, replaces the shipped one for the rest of the run). The tuner's table is written to the
# output folder and copied over the package's table for this GPU (hsma_trsm/tuning/), which the
# tests and the benchmark then use; commit it from the output folder to ship it. Opt-in stages:
# shapes (the shape-space suite), solvers (the solvers and switch benchmark suites), notebooks, profile, ncu.
# Everything written is packed into OUTDIR/run.tgz at the end (the device tool returns a limited number of files).
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-${OUT:-gpu-out}}
mkdir -p "$OUTDIR"
STAGES=${STAGES:-build tune test sanitize bench}
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
status=0

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  "$PY" -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'hip', torch.version.hip)"
  nvcc --version | tail -n 2
} >"$OUTDIR/env.txt" 2>&1
cat "$OUTDIR/env.txt"

if [[ " $STAGES " == *" build "* ]]; then
  echo "== build"
  start=$(date +%s)
  # In place (ninja, incremental: a warm machine recompiles only what changed); the checkout is on PYTHONPATH.
  # HSMA_TRSM_ABLATION=1: the ablation kernel too, for the small suite's kernel ablation.
  if HSMA_TRSM_ABLATION=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=$(nproc) "$PY" setup.py \
      build_ext --inplace \
      >"$OUTDIR/build.log" 2>&1; then
    echo "build ok in $(( $(date +%s) - start )) s"
    grep -E "registers|spill|smem" "$OUTDIR/build.log" | sort -u | head -n 40 || true
  else
    tail -n 80 "$OUTDIR/build.log"
    echo "BUILD FAILED"
    exit 1
  fi
fi

if [[ " $STAGES " == *" tune "* ]]; then
  echo "== tune"
  start=$(date +%s)
  table="$OUTDIR/$("$PY" -c "import os, benchmarks.tune as t; print(os.path.basename(t.table_path_for_current_gpu()))")"
  timeout "${TUNE_TIMEOUT:-180}" "$PY" -m benchmarks.tune --out "$table" --sweep-csv "$OUTDIR/tune_sweep.csv" ${TUNE_ARGS:-} \
    >"$OUTDIR/tune.log" 2>&1 || status=1
  echo "tune took $(( $(date +%s) - start )) s"
  tail -n 40 "$OUTDIR/tune.log"
  # The fresh table replaces the shipped one for the tests and the benchmark of this run.
  [ -s "$table" ] && cp "$table" hsma_trsm/tuning/
fi

if [[ " $STAGES " == *" paths "* ]]; then
  # The path table (benchmarks/tune_paths.py): hsma's paths and torch's kernel timed on the (dtype, k, cols, batch)
  # grid; like the block-size table it replaces the shipped one for the rest of the run.
  echo "== paths"
  start=$(date +%s)
  table="$OUTDIR/$("$PY" -c "import benchmarks.tune_paths as t; print(t.table_name())")"
  timeout "${PATHS_TIMEOUT:-330}" "$PY" -m benchmarks.tune_paths --out "$table" --budget-s "${PATHS_BUDGET:-300}" \
    ${PATHS_ARGS:-} >"$OUTDIR/tune_paths.log" 2>&1 || status=1
  echo "path tuning took $(( $(date +%s) - start )) s"
  grep -v "paths:" "$OUTDIR/tune_paths.log" | tail -n 12
  [ -s "$table" ] && cp "$table" hsma_trsm/tuning/
fi

if [[ " $STAGES " == *" test "* ]]; then
  echo "== tests"
  start=$(date +%s)
  k_args=()
  [ -n "${PYTEST_K:-}" ] && k_args=(-k "$PYTEST_K")
  timeout "${TEST_TIMEOUT:-200}" "$PY" -m pytest -q -n 4 --junitxml="$OUTDIR/junit.xml" "${k_args[@]}" ${PYTEST_ARGS:-} tests \
    >"$OUTDIR/tests.log" 2>&1 || status=1
  echo "tests took $(( $(date +%s) - start )) s"
  grep -E "passed|failed|error" "$OUTDIR/tests.log" | tail -n 3
  grep -E "^(FAILED|ERROR)" "$OUTDIR/tests.log" | head -n 40
fi

if [[ " $STAGES " == *" sanitize "* ]]; then
  # compute-sanitizer memcheck and racecheck over a small GPU test subset: every CUDA path once
  # (small column and segment kernels, direct leaves, inverted blocks in both variants, in place,
  # backward), tests/test_dropin_robustness.py -k cuda_path_sweep; SANITIZE_K / SANITIZE_TESTS
  # change the selection. torch's caching allocator is off, so each tensor is its own allocation
  # and an out-of-bounds access inside a cached block cannot hide from memcheck.
  echo "== sanitize"
  SAN=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")/compute-sanitizer")}
  if [ -x "$SAN" ]; then
    for tool in memcheck racecheck; do
      start=$(date +%s)
      PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "${SANITIZE_TIMEOUT:-240}" "$SAN" --tool "$tool" --print-limit 100 \
        --error-exitcode 42 --target-processes all \
        "$PY" -m pytest -q -p no:cacheprovider ${SANITIZE_TESTS:-tests/test_dropin_robustness.py} \
        -k "${SANITIZE_K:-cuda_path_sweep}" >"$OUTDIR/sanitize_$tool.log" 2>&1
      rc=$?
      { echo "== compute-sanitizer --tool $tool: exit $rc"; cat "$OUTDIR/sanitize_$tool.log"; } >>"$OUTDIR/sanitize.log"
      echo "$tool: exit $rc in $(( $(date +%s) - start )) s$([ $rc -eq 124 ] && echo ' (timed out)')"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|(passed|failed|skipped|error).* in [0-9.]+s" "$OUTDIR/sanitize_$tool.log" | tail -n 3
      rm -f "$OUTDIR/sanitize_$tool.log"
      [ $rc -eq 0 ] || status=1
    done
  else
    echo "compute-sanitizer not found (set COMPUTE_SANITIZER); sanitize stage skipped"
    status=1
  fi
fi

if [[ " $STAGES " == *" bench "* ]]; then
  echo "== benchmark"
  # fla-core for the deltanet suite, from a carried wheel (pip download --no-deps fla-core==0.6.0 -d wheels)
  for w in wheels/fla_core-*.whl; do [ -f "$w" ] && "$PY" -m pip install -q --no-deps --no-index "$w" \
    >"$OUTDIR/fla_install.log" 2>&1; done
  # Every suite but solvers and switch (the stage below), clients and gpytorch included: their time budgets add up
  # to about 8 minutes at most. --verbose: bench.log keeps every case's line (the console shows the summary).
  timeout "${BENCH_TIMEOUT:-540}" "$PY" -m benchmarks \
    --suite small,batched,large,ablation,split,overhead,clients,gpytorch,deltanet --out "$OUTDIR" --verbose ${BENCH_ARGS:-} \
    >"$OUTDIR/bench.log" 2>&1 || status=1
  tail -n 80 "$OUTDIR/bench.log"
fi

if [[ " $STAGES " == *" shapes "* ]]; then
  # Opt-in: the shape-space suite (benchmarks/shapes.py): seeded random shapes, eager and GPU-only, forward and
  # backward, the drop-in and the switch, against torch; shapes.csv, shapes.md and shapes_map.png in OUTDIR.
  echo "== shapes"
  start=$(date +%s)
  timeout "${SHAPES_TIMEOUT:-420}" "$PY" -m benchmarks.shapes --out "$OUTDIR" ${SHAPES_ARGS:-} \
    >"$OUTDIR/shapes.log" 2>&1 || status=1
  echo "shapes took $(( $(date +%s) - start )) s"
  tail -n 70 "$OUTDIR/shapes.log"
fi

if [[ " $STAGES " == *" solvers "* ]]; then
  # Opt-in (STAGES="build solvers"): cholesky_solve / lu_solve against torch and the real clients with the switch
  # off and on (GPyTorch, BoTorch, a Kalman filter), into OUTDIR/solvers-switch/ (its own report.md); time budgets
  # about 5.5 minutes at most.
  echo "== benchmark: solvers and switch"
  mkdir -p "$OUTDIR/solvers-switch"
  timeout "${SOLVERS_TIMEOUT:-540}" "$PY" -m benchmarks --suite solvers,switch --out "$OUTDIR/solvers-switch" \
    --verbose ${BENCH_ARGS:-} >"$OUTDIR/solvers-switch/bench.log" 2>&1 || status=1
  tail -n 60 "$OUTDIR/solvers-switch/bench.log"
fi

if [[ " $STAGES " == *" notebooks "* ]]; then
  # Opt-in (STAGES="build notebooks"): execute notebooks/*.ipynb (or NOTEBOOKS="a.ipynb ...") in
  # place with scripts/run_notebooks.sh, which installs nbclient/ipykernel from a carried wheels/
  # (scripts/fetch_notebook_wheels.sh); the executed notebooks and the PNGs they wrote are copied
  # to OUTDIR (failed ones as NAME.failed.ipynb).
  echo "== notebooks"
  start=$(date +%s)
  marker="$OUTDIR/.notebooks-start"
  touch "$marker"
  timeout "${NOTEBOOKS_TIMEOUT:-480}" scripts/run_notebooks.sh ${NOTEBOOKS:-} >"$OUTDIR/notebooks.log" 2>&1 || status=1
  echo "notebooks took $(( $(date +%s) - start )) s"
  tail -n 40 "$OUTDIR/notebooks.log"
  find notebooks -maxdepth 1 \( -name '*.ipynb' -o -name '*.png' \) -newer "$marker" -exec cp {} "$OUTDIR/" \;
  rm -f "$marker"
fi
if [[ " $STAGES " == *" profile "* ]]; then
  # Opt-in: per-kernel GPU time and host time of selected solves (scripts/probes/profile_cases.py);
  # PROFILE_FILTER: its --filter (cases whose names contain one of these |-separated strings).
  echo "== profile"
  f_args=()
  [ -n "${PROFILE_FILTER:-}" ] && f_args=(--filter "$PROFILE_FILTER")
  timeout "${PROFILE_TIMEOUT:-200}" "$PY" scripts/probes/profile_cases.py --out "$OUTDIR" "${f_args[@]}" ${PROFILE_ARGS:-} \
    >"$OUTDIR/profile.log" 2>&1 || status=1
  grep -v -i warn "$OUTDIR/profile.log" | cut -c1-160 | tail -n 60
fi

if [[ " $STAGES " == *" ncu "* ]]; then
  # Opt-in: Nsight Compute on selected kernels of selected solves (stall reasons, occupancy,
  # memory throughput): NCU_KERNELS (a regex of kernel names, default the small-path kernels) over
  # scripts/probes/profile_cases.py --plain --filter "$PROFILE_FILTER" $PROFILE_ARGS (each solve called twice, the first
  # NCU_LAUNCHES matching launches profiled, default 20); NCU_ARGS adds ncu options. The H200's
  # clocks are left alone (--clock-control none).
  echo "== ncu"
  NCU=${NCU:-$(command -v ncu || echo "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")/ncu")}
  if [ -x "$NCU" ]; then
    f_args=()
    [ -n "${PROFILE_FILTER:-}" ] && f_args=(--filter "$PROFILE_FILTER")
    mkdir -p "$OUTDIR/ncu-cases"
    timeout "${NCU_TIMEOUT:-300}" "$NCU" --clock-control none --target-processes all \
      -k "regex:${NCU_KERNELS:-small_solve|diag_inverse}" --launch-count "${NCU_LAUNCHES:-20}" \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis ${NCU_ARGS:-} \
      "$PY" scripts/probes/profile_cases.py --out "$OUTDIR/ncu-cases" --plain --calls 1 "${f_args[@]}" ${PROFILE_ARGS:-} >"$OUTDIR/ncu.log" 2>&1 || status=1
    grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Stall" \
      "$OUTDIR/ncu.log" | head -n 80
  else
    echo "ncu not found (set NCU); ncu stage skipped"
    status=1
  fi
fi

# Everything in one archive (the device tool returns a limited number of files).
tmp_tgz=$(mktemp /tmp/run.XXXXXX.tgz)
(cd "$OUTDIR" && tar czf "$tmp_tgz" . && find . -type f -delete && mv "$tmp_tgz" run.tgz)
ls -la "$OUTDIR"
exit $status
