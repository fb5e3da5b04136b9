#!/usr/bin/env bash
# Compile-only checks of the GPU sources on a machine without a GPU (CI runs this):
#   - every kernel source (csrc/kernels/*.cu, and ablation/*.cu with -DHSMA_TRSM_ABLATION as an
#     HSMA_TRSM_ABLATION=1 build makes it) with nvcc for sm_90, and every kernel of its PTX
#     checked for a global store and against the PTX built with --expt-relaxed-constexpr
#     (scripts/ptx_entries_check.py);
#   - every kernel source with hipcc for AMD gfx906 (wave64, the paper's DCU/MI50 class) and
#     gfx90a (MI200 class), compile only;
#   - the torch-facing CUDA backend (csrc/cuda/*.cpp) for syntax against the installed torch
#     headers (a CPU torch lacks one generated CUDA header; a stub stands in for it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if command -v nvcc >/dev/null; then
  # Bare flags on purpose (not torch's, which add --expt-relaxed-constexpr): the kernels must not
  # depend on them. The PTX is kept, and PTX is also made with that flag: every kernel must write
  # global memory and have as many instructions in both (scripts/ptx_entries_check.py), so that
  # code the compiler dropped in one build only (undefined behaviour there) cannot pass as compiled.
  mkdir -p "$tmp/ptx" "$tmp/ptx-relaxed"
  for f in csrc/kernels/*.cu csrc/kernels/ablation/*.cu; do
    echo "nvcc sm_90: $f"
    def=(); case "$f" in */ablation/*) def=(-DHSMA_TRSM_ABLATION) ;; esac
    nvcc -std=c++17 -O3 -arch=sm_90 --split-compile=0 -Xptxas -warn-spills -keep -keep-dir "$tmp/ptx" "${def[@]}" \
      -c "$f" -o "$tmp/$(basename "$f").o"
    # (the same NVVM options as above: --split-compile=0 alone changes the PTX)
    nvcc -std=c++17 -O3 -arch=sm_90 --split-compile=0 --expt-relaxed-constexpr "${def[@]}" -ptx "$f" \
      -o "$tmp/ptx-relaxed/$(basename "${f%.cu}").ptx"
  done
  "$PY" scripts/ptx_entries_check.py --relaxed "$tmp/ptx-relaxed" "$tmp"/ptx/*.ptx
  cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
  [ -f "$cuda_inc/cuda_runtime_api.h" ] || cuda_inc=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")/include
  torch_inc=$("$PY" -c "from torch.utils.cpp_extension import include_paths; print(' '.join('-I'+p for p in include_paths()))")
  py_inc=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
  mkdir -p "$tmp/stub/c10/cuda/impl"
  echo '#define C10_CUDA_BUILD_SHARED_LIBS' >"$tmp/stub/c10/cuda/impl/cuda_cmake_macros.h"
  for f in csrc/cuda/*.cpp; do
    echo "g++ syntax: $f"
    # shellcheck disable=SC2086
    g++ -std=c++20 -fsyntax-only -DUSE_CUDA -I"$tmp/stub" $torch_inc -I"$py_inc" -I"$cuda_inc" -Icsrc "$f"
  done
else
  echo "nvcc not found: skipping the CUDA compile check" >&2
  exit 1
fi
if [ "${HSMA_SKIP_HIP:-0}" != 1 ]; then
  if command -v hipcc >/dev/null; then
    # The kernels include no torch and no hipify step is needed: portable.cuh maps the vendor APIs.
    # Debian's hipcc (ROCm 5.2) defaults to the NVIDIA platform when nvcc is present.
    for f in csrc/kernels/*.cu csrc/kernels/ablation/*.cu; do
      def=(); case "$f" in */ablation/*) def=(-DHSMA_TRSM_ABLATION) ;; esac
      for arch in gfx906 gfx90a; do
        echo "hipcc $arch: $f"
        HIP_PLATFORM=amd hipcc -x hip --offload-arch=$arch -std=c++17 -O3 -Werror=unused-result "${def[@]}" -c "$f" \
          -o "$tmp/$(basename "$f").$arch.o"
      done
    done
  else
    echo "hipcc not found: the AMD compile check did not run (set HSMA_SKIP_HIP=1 to skip it on purpose)" >&2
    exit 1
  fi
fi
echo "compile checks passed"
