// The sweep's host side (kernels/sweep.cu): solves of order above 64 against panels of at most 16
// columns, in one launch after zeroing its workspace; and the blocked path's repair.
#pragma once
#include <ATen/ATen.h>

#include "blocking.h"
#include "trsm.h"

namespace hsma {

// Solves op(A) X = alpha B (or the right-side form) for A3 (1 or bt, k, k) and B3 (bt, m, n) into
// X3 (bt, m, n, fresh) with the plan's row block, panel width and task length. false (nothing
// launched): more tasks than one launch takes, or more shared memory than the GPU has; the caller
// solves another way.
template <typename S>
bool sweep_solve(const at::Tensor& A3, const at::Tensor& B3, at::Tensor& X3, const TrsmArgs& args,
                 const SweepPlan& plan);

// The blocked path's repair: one launch that re-solves into X3 by substitution, dividing by each
// pivot, if one of the int flags `inaccurate` is set (an inverted diagonal block with an inf, nan
// or subnormal entry), and does nothing otherwise.
template <typename S>
void sweep_repair(const at::Tensor& A3, const at::Tensor& B3, at::Tensor& X3, const TrsmArgs& args,
                  const at::Tensor& inaccurate);

}  // namespace hsma
