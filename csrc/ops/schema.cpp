// torch.ops.hsma: the schemas (trsm, trsm_, and trtri: csrc/ops/inverse.cpp), the CPU kernel
// (through ATen, i.e. LAPACK trsm), the Autograd-key guard of the in-place form and the conj/neg
// fallthroughs. The argument checks are in
// checks.cpp, the CUDA kernels in csrc/cuda/trsm_cuda.cpp, the autograd formula in autograd.cpp,
// the fake (meta) kernels in hsma_trsm/_ops.py.
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "trsm.h"

namespace hsma {

static at::Tensor trsm_cpu(const at::Tensor& A, const at::Tensor& B, bool left, bool upper,
                           c10::string_view trans, bool unitriangular, const c10::Scalar& alpha) {
  const TrsmArgs args = make_args(left, upper, trans, unitriangular, alpha);
  at::Tensor X = at::empty(check_trsm(A, B, args, "hsma::trsm").result, B.options());
  aten_solve_into(A, B, args, X);
  return X;
}

static void trsm_cpu_(const at::Tensor& A, at::Tensor& B, bool left, bool upper, c10::string_view trans,
                      bool unitriangular, const c10::Scalar& alpha) {
  const TrsmArgs args = make_args(left, upper, trans, unitriangular, alpha);
  const TrsmShape s = check_trsm(A, B, args, "hsma::trsm_");
  check_inplace(A, B, s, "hsma::trsm_");
  at::Tensor X = at::empty(s.result, B.options());
  aten_solve_into(A, B, args, X);
  B.copy_(X);
}

// The plan of a CPU solve: LAPACK through ATen, whatever the shape (torch.ops.hsma._plan; the CUDA plan is in
// csrc/cuda/trsm_cuda.cpp).
static std::tuple<std::string, std::string> plan_cpu(const at::Tensor& A, const at::Tensor& B, bool left, bool upper,
                                                     c10::string_view trans, bool unitriangular, bool explain) {
  const TrsmShape s = check_trsm(A, B, make_args(left, upper, trans, unitriangular, 1), "hsma::_plan");
  int64_t numel = 1;
  for (auto v : s.result) numel *= v;
  if (numel == 0) return {"empty", explain ? "an empty result: nothing to solve" : ""};
  return {"lapack", explain ? "CPU: LAPACK ?trsm through ATen, torch's own CPU kernel" : ""};
}

// Autograd key of the in-place form: it has no derivative formula; refuse clearly when a
// gradient is wanted, otherwise pass through to the backend and bump B's version counter.
static void trsm_autograd_(const at::Tensor& A, at::Tensor& B, bool left, bool upper,
                                  c10::string_view trans, bool unitriangular, const c10::Scalar& alpha) {
  HSMA_CHECK(!(c10::GradMode::is_enabled() && (A.requires_grad() || B.requires_grad())),
              "hsma::trsm_: the in-place solve does not support autograd (A or B requires grad); "
              "use the functional torch.ops.hsma.trsm / hsma_trsm.trsm instead");
  // Forward mode likewise: B's tangent would silently go stale.
  HSMA_CHECK(!(A._fw_grad(/*level=*/0).defined() || B._fw_grad(/*level=*/0).defined()),
              "hsma::trsm_: the in-place solve does not support forward-mode AD (A or B has a tangent); "
              "use the functional torch.ops.hsma.trsm / hsma_trsm.trsm instead");
  static const auto op =
      hsma_op<void(const at::Tensor&, at::Tensor&, bool, bool, c10::string_view, bool, const c10::Scalar&)>(
          "hsma::trsm_");
  {
    c10::impl::ExcludeDispatchKeyGuard guard(c10::autograd_dispatch_keyset_with_ADInplaceOrView);
    op.call(A, B, left, upper, trans, unitriangular, alpha);
  }
  B.unsafeGetTensorImpl()->bump_version();
}

}  // namespace hsma

TORCH_LIBRARY(hsma, m) {
  m.def(
      "trsm(Tensor A, Tensor B, *, bool left=True, bool upper=False, str trans=\"N\", "
      "bool unitriangular=False, Scalar alpha=1) -> Tensor");
  m.def(
      "trsm_(Tensor A, Tensor(a!) B, *, bool left=True, bool upper=False, str trans=\"N\", "
      "bool unitriangular=False, Scalar alpha=1) -> ()");
  m.def("trtri(Tensor A, *, bool upper, bool unitriangular=False, ScalarType? out_dtype=None) -> Tensor");
  // Which path a trsm call with these operands takes, and why: (path, reason); the reason only with explain.
  m.def("_plan(Tensor A, Tensor B, *, bool left=True, bool upper=False, str trans=\"N\", bool unitriangular=False, "
        "bool explain=True) -> (str, str)");
}

TORCH_LIBRARY_IMPL(hsma, CPU, m) {
  m.impl("trsm", &hsma::trsm_cpu);
  m.impl("trsm_", &hsma::trsm_cpu_);
  m.impl("_plan", &hsma::plan_cpu);
}

TORCH_LIBRARY_IMPL(hsma, Autograd, m) { m.impl("trsm_", &hsma::trsm_autograd_); }

// Conjugate and negative views reach the kernels as they are: the CPU kernel hands them to ATen,
// the CUDA kernels fold a conjugated A into their conj flag (A.mH() costs no copy) and resolve
// the rest. (The generic math-bits fallback would materialise every such input, and it cannot
// serve an in-place op that returns nothing.)
TORCH_LIBRARY_IMPL(hsma, Conjugate, m) {
  m.impl("trsm", torch::CppFunction::makeFallthrough());
  m.impl("trsm_", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(hsma, Negative, m) {
  m.impl("trsm", torch::CppFunction::makeFallthrough());
  m.impl("trsm_", torch::CppFunction::makeFallthrough());
}
