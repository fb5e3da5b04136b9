// The blocked path (orders above 64; blocked.cpp): the block plan (csrc/blocking.h) run as
// one launch that inverts the diagonal blocks (or none: leaves solved by the small kernels) and
// a recursive or left-looking driver whose leaves are GEMMs with the inverted blocks.
#pragma once
#include <ATen/ATen.h>

#include "blocking.h"
#include "trsm.h"

namespace hsma {

// The plan (csrc/blocking.h) of the solve of (A, B), k > 64, on the current CUDA device; `explain`: its source
// names the path table's cell and its measured times.
BlockPlan plan_large(const at::Tensor& A, const TrsmArgs& args, const TrsmShape& s, bool explain = false);

// The solve of (A, B) into X (fresh and contiguous; S: ATen's scalar type).
template <typename S>
void blocked_solve(const at::Tensor& A, const at::Tensor& B, at::Tensor& X, const TrsmArgs& args, const TrsmShape& s);

}  // namespace hsma
