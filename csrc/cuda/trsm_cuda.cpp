// CUDA (and, hipified, ROCm) backend of torch.ops.hsma.trsm: checks the arguments (csrc/trsm.h),
// then every (side, uplo, trans, diag, strides, conj view) becomes the kernels' canonical
// lower-triangular left solve (canonical.h), solved by
//   - the small path (A's order k <= 64; canonical.cpp): one launch of the shared-memory direct
//     solve for the whole batch, reading A and B in place through their strides (broadcast A never
//     copied);
//   - the blocked path (k > 64; blocked.cpp): the block plan (csrc/blocking.h), one launch that
//     inverts the diagonal blocks, then a recursive or left-looking driver whose leaves are GEMMs
//     with the inverted blocks (gemm.h: cuBLAS, or ATen).
// bfloat16 and float16 are solved in float32 (inputs converted, the result rounded once).
// Everything runs on torch's current stream; nothing synchronises with the host.
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "cuda/blocked.h"
#include "cuda/canonical.h"
#include "trsm.h"

namespace hsma {
namespace {

// Solves into X (fresh and contiguous, or B itself for the in-place form).
void solve_into(const at::Tensor& A_in, const at::Tensor& B_in, at::Tensor& X, const TrsmArgs& args,
                const TrsmShape& s) {
  if (X.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(A_in.device());
  // Negative views are resolved (rare); A's conj view is folded into the kernels' conj flag.
  const at::Tensor A = A_in.resolve_neg();
  const at::Tensor B = B_in.resolve_conj().resolve_neg();
  AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES(A.scalar_type(), "hsma::trsm", [&] {
    if (s.k <= kSmallMaxM)
      small_solve<scalar_t>(A, B, X, args, s);
    else
      blocked_solve<scalar_t>(A, B, X, args, s);
  });
}

at::Tensor solve_new(const at::Tensor& A, const at::Tensor& B, const TrsmArgs& args, const TrsmShape& s) {
  at::Tensor X = at::empty(s.result, B.options());
  solve_into(A, B, X, args, s);
  return X;
}

at::Tensor trsm_cuda(const at::Tensor& A, const at::Tensor& B, bool left, bool upper, c10::string_view trans,
                     bool unitriangular, const c10::Scalar& alpha) {
  const TrsmArgs args = make_args(left, upper, trans, unitriangular, alpha);
  const TrsmShape s = check_trsm(A, B, args, "hsma::trsm");
  // bfloat16 / float16: the float32 solve of the converted inputs, rounded once to their dtype.
  if (half_dtype(A.scalar_type())) return solve_new(as_float32(A), as_float32(B), args, s).to(A.scalar_type());
  return solve_new(A, B, args, s);
}

void trsm_cuda_(const at::Tensor& A, at::Tensor& B, bool left, bool upper, c10::string_view trans,
                bool unitriangular, const c10::Scalar& alpha) {
  const TrsmArgs args = make_args(left, upper, trans, unitriangular, alpha);
  const TrsmShape s = check_trsm(A, B, args, "hsma::trsm_");
  check_inplace(A, B, s, "hsma::trsm_");
  if (half_dtype(B.scalar_type())) {
    B.copy_(solve_new(as_float32(A), as_float32(B), args, s));
  } else if (s.k <= kSmallMaxM && !B.is_conj() && !B.is_neg()) {
    solve_into(A, B, B, args, s);  // the small kernel reads each element before writing it
  } else {
    B.copy_(solve_new(A, B, args, s));
  }
}

// The path of a trsm call (torch.ops.hsma._plan): small, empty, or the large-order plan with its parameters.
std::tuple<std::string, std::string> plan_cuda(const at::Tensor& A, const at::Tensor& B, bool left, bool upper,
                                               c10::string_view trans, bool unitriangular, bool explain) {
  const TrsmArgs args = make_args(left, upper, trans, unitriangular, 1);
  const TrsmShape s = check_trsm(A, B, args, "hsma::_plan");
  int64_t numel = 1;
  for (auto v : s.result) numel *= v;
  if (numel == 0) return {"empty", explain ? "an empty result: nothing to solve" : ""};
  if (s.k <= kSmallMaxM)
    return {"small", explain ? "order k <= 64: one launch of the shared-memory kernels for the whole batch" : ""};
  const c10::cuda::CUDAGuard guard(A.device());
  const BlockPlan p = plan_large(A, args, s, explain);
  if (!explain) return {path_name(p.path), ""};
  std::string what;
  if (p.path == LargePath::kSweep)
    what = "sweep (row block " + std::to_string(p.sweep.rows) + ", panel " + std::to_string(p.sweep.cols) +
           " columns, tasks of " + std::to_string(p.sweep.segment) + " row blocks); ";
  else if (p.path == LargePath::kBlocked)
    what = std::string("blocked (NB ") + std::to_string(p.nb) + ", " + variant_name(p.variant) + ", IB " +
           std::to_string(p.ib) + "); ";
  return {path_name(p.path), what + p.source};
}

}  // namespace
}  // namespace hsma

TORCH_LIBRARY_IMPL(hsma, CUDA, m) {
  m.impl("trsm", &hsma::trsm_cuda);
  m.impl("trsm_", &hsma::trsm_cuda_);
  m.impl("_plan", &hsma::plan_cuda);
}
