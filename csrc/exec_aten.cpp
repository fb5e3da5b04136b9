// The hand-off executor: ATen's solve (csrc/trsm.h, aten_solve_into), for the CUDA plan's path kAten (the
// hand-off to torch's cuBLAS kernel, csrc/planner.h) and the CPU kernel (LAPACK). Built in the CPU and CUDA builds.
#include <ATen/ATen.h>

#include <vector>

#include "trsm.h"

namespace hsma {

void aten_solve_into(const at::Tensor& A, const at::Tensor& B, const TrsmArgs& args, at::Tensor& X) {
  const bool half = half_dtype(B.scalar_type());  // (A: B's dtype or float32)
  const at::Tensor Aw = half ? as_float32(A) : A, Bw = half ? as_float32(B) : B;
  const at::Tensor opA = args.trans == Trans::kN ? Aw : (args.trans == Trans::kT ? Aw.mT() : Aw.mH());
  const bool upper_eff = args.upper != (args.trans != Trans::kN);
  // alpha scales B before the solve, as the CUDA kernels do (and as BLAS defines it), so that intermediate
  // overflow behaves the same on every path.
  const bool unit_alpha = !args.alpha.isComplex() && args.alpha.toDouble() == 1.0;
  // Through the out= overload, which the switch never routes, into torch's own column-major result, then one copy
  // into X: torch makes the call of its functional form whatever X's layout (into a row-major X it would solve the
  // transposed equation, up to 2x slower on CUDA for a few columns, and with other bits on the CPU). A single
  // column is row- and column-major alike: a dense X itself, with torch's strides, and no copy.
  if (X.scalar_type() != Bw.scalar_type()) {  // bfloat16 / float16: solved in float32, rounded once
    at::Tensor R = at::empty(X.sizes(), Bw.options());
    aten_solve_into(Aw, Bw, args, R);
    X.copy_(R);
    return;
  }
  at::Tensor out = X;
  const int64_t d = X.dim();
  if (X.size(d - 1) == 1 && X.size(d - 2) > 1 && X.is_contiguous()) {
    std::vector<int64_t> strides = X.strides().vec();
    strides[d - 1] = X.size(d - 2);
    strides[d - 2] = 1;
    out = X.as_strided(X.sizes(), strides, X.storage_offset());
  } else {
    out = at::empty({0}, X.options());  // resized by torch to its column-major layout
  }
  at::linalg_solve_triangular_out(out, opA, unit_alpha ? Bw : Bw * args.alpha, upper_eff, args.left, args.unit);
  if (!out.is_same(X) && !out.is_alias_of(X)) X.copy_(out);
}

}  // namespace hsma
