// The CUDA executors, one per path of the plan (csrc/planner.h); each runs its plan as it is and decides nothing:
//   small    (exec_small.cpp):   orders up to 64, one launch of the small kernels for the whole batch;
//   sweep    (exec_sweep.cpp):   orders above 64 against a few columns, one launch of the sweep kernel;
//   blocked  (exec_blocked.cpp): the diagonal blocks inverted in one launch (or solved by the small kernels), a
//                                recursive or left-looking driver of GEMMs, then the repair (exec_repair.cpp);
//   hand-off (csrc/exec_aten.cpp, aten_solve_into): ATen's solve, i.e. torch's cuBLAS kernel.
// S: ATen's scalar type. X is fresh and contiguous, or (small path) B itself in place, or a view.
#pragma once
#include <ATen/ATen.h>

#include "planner.h"
#include "trsm.h"

namespace hsma {

// Orders k <= kSmallMaxM, with the plan's small-kernel knobs.
template <typename S>
void exec_small(const at::Tensor& A, const at::Tensor& B, at::Tensor& X, const TrsmArgs& args, const TrsmShape& s,
                const SmallKnobs& knobs);

// The sweep with the plan's row block, panel width and task length; max_blocks caps its grid (0: none). Raises
// when the launch cannot take the plan (the planner checked that it can: sweep_fits in planner.cpp).
template <typename S>
void exec_sweep(const at::Tensor& A, const at::Tensor& B, at::Tensor& X, const TrsmArgs& args, const TrsmShape& s,
                const SweepPlan& plan, int64_t max_blocks);

// The blocked path's plan (NB, variant, IB, the repair's panel width).
template <typename S>
void exec_blocked(const at::Tensor& A, const at::Tensor& B, at::Tensor& X, const TrsmArgs& args, const TrsmShape& s,
                  const Plan& plan);

// The blocked path's repair, for A3 (1 or bt, k, k), B3 and X3 (bt, m, n): one launch of the sweep kernel's repair
// mode (kernels/sweep.cu), panels of `cols` columns (BlockPlan::repair_cols), that re-solves into X3 by
// substitution the batch entries whose int flag in `inaccurate` is set (an inverted diagonal block with an inf,
// nan or subnormal entry), and does nothing otherwise.
template <typename S>
void exec_repair(const at::Tensor& A3, const at::Tensor& B3, at::Tensor& X3, const TrsmArgs& args,
                 const at::Tensor& inaccurate, int cols);

}  // namespace hsma
