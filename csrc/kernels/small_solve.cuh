// Small-scale direct solve (the HSMA-TRSM paper's small regime, m <= 64): L X = alpha B with the
// whole triangle of L in shared memory. Kernel families, one header each under small/ with its
// launcher: the column kernel (column.cuh: a column of X per thread), the segment kernel
// (segment.cuh: a column over a segment's lanes; also one matrix per warp), the register-tiled
// tile kernel (tiles.cuh) and the FP64 tensor-core kernel (mma.cuh); shared device code and launch
// helpers in common.cuh. small/select.h chooses the family and its variant (a pure function, tested
// on the host); launch_small_solve below runs the choice.
//
// All take the division off the critical path: each pivot's reciprocal is computed once per
// matrix while the triangle is loaded, and x_k is multiplied by it, unless only a true division
// is exact enough there (zero, subnormal, huge or non-finite pivots; see pivot_reciprocal).
// The kernels and launchers are templates; small_solve_<dtype>.cu instantiate one data type each,
// so that they compile in parallel. bfloat16 and float16 (small_solve_bfloat16.cu, _float16.cu) are
// solved in float32 by the column and segment kernels, which widen L and B as they load them and
// round X once as they store it; L may also be float32 with a 16-bit B and X.
#pragma once
#include "small/column.cuh"
#include "small/mma.cuh"
#include "small/segment.cuh"
#include "small/tiles.cuh"

namespace hsma {
namespace {

// Whether a problem's L, B and X are stored in its arithmetic type (else the 16-bit types: the column and
// segment kernels only).
template <typename T, typename SA, typename SB> constexpr bool stored_as_computed() {
  return std::is_same_v<SA, T> && std::is_same_v<SB, T>;
}

// A problem as the selection sees it: its shape, whether one A serves every task, L's layout and storage,
// the knobs it carries (a tile or tensor-core kernel forced for 16-bit storage: the selection's choice).
template <typename T, typename SA, typename SB> SmallShape small_shape(const SolveProblem<T, SA, SB>& p) {
  SmallShape s;
  s.dtype = small_dtype<T>();
  s.m = p.m;
  s.n = p.n;
  s.batch = p.batch;
  s.a_shared = shares_a(p);
  s.l_row_major = (p.l.col < 0 ? -p.l.col : p.l.col) <= (p.l.row < 0 ? -p.l.row : p.l.row);
  s.l_16bit = !std::is_same_v<SA, T>;
  copy_small_knobs(s, p);
  if (!stored_as_computed<T, SA, SB>() && (s.kernel == SmallKernel::kTiles || s.kernel == SmallKernel::kMma))
    s.kernel = SmallKernel::kAuto;
  return s;
}

// The device as the selection sees it (whether the kernels' code is for compute_90 matters on
// sm_90+ only, and is asked there).
inline SmallDevice small_device(const DeviceInfo& dev) {
  SmallDevice d;
  d.multiprocessors = dev.multiprocessors;
  d.cc_major = dev.cc_major;
  d.hip = HSMA_HIP;
  d.sm90_code = dev.cc_major >= 9 && kernels_wait(dev);
  return d;
}

}  // namespace

template <typename T, typename SA, typename SB>
hsmaError_t launch_small_solve(const SolveProblem<T, SA, SB>& p, hsmaStream_t stream) {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return hsmaSuccess;
  if (p.m > kSmallMaxM) return hsmaError_t(1);
  const DeviceInfo& dev = current_device_info();
  const SmallPlan plan = choose_small_kernel(small_shape(p), small_device(dev));
  switch (plan.family) {
    case SmallFamily::kColumns:
      return run_columns(p, plan, dev, stream);
    case SmallFamily::kSegments:
      return run_segments(p, plan, dev, stream);
    case SmallFamily::kWarpTasks:
      return run_warp_tasks(p, plan, dev, stream);
    case SmallFamily::kTiles:
      if constexpr (stored_as_computed<T, SA, SB>()) return run_tiles(p, plan, dev, stream);
      break;
    case SmallFamily::kMma:
      if constexpr (stored_as_computed<T, SA, SB>()) return run_mma(p, plan, dev, stream);
      break;
#ifdef HSMA_TRSM_ABLATION
    case SmallFamily::kPipeline:
      if constexpr (std::is_same_v<T, complex<double>>) return launch_small_pipeline(p, stream);
      break;
#endif
  }
  return hsmaError_t(1);  // (not a plan of select.h)
}
}  // namespace hsma
