// torch.ops.hsma.trtri: inverses of triangular matrices (LAPACK's trtri, batched). The checks, the
// inverse as a solve against an identity (the CPU kernel, and the CUDA backend's route where its
// kernel does not serve: complex types, orders above 64), the CPU registration and the Autograd
// kernel. The CUDA kernel is in csrc/cuda/inverse.cpp, the fake kernel in hsma_trsm/_ops.py.
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include "trsm.h"

namespace hsma {

// The inverse's dtype: out_dtype (default A's), of the supported ones, complex exactly when A is.
static at::ScalarType trtri_out_dtype(const at::Tensor& A, std::optional<at::ScalarType> out_dtype, const char* op) {
  const at::ScalarType out = out_dtype.value_or(A.scalar_type());
  TORCH_CHECK_TYPE(supported_dtype(out) && at::isComplexType(out) == at::isComplexType(A.scalar_type()), op,
                   ": out_dtype must be one of the supported dtypes, complex exactly when A is; got ", out,
                   " for A of ", A.scalar_type());
  return out;
}

at::ScalarType check_trtri(const at::Tensor& A, std::optional<at::ScalarType> out_dtype, const char* op) {
  HSMA_CHECK(A.dim() >= 2, op, ": A must have at least 2 dimensions (*, k, k), got shape ", shape(A.sizes()));
  HSMA_CHECK(A.size(-1) == A.size(-2), op, ": A must be batches of square matrices, got shape ", shape(A.sizes()));
  HSMA_CHECK(A.layout() == at::kStrided, op, ": A must be a strided (dense) tensor");
  TORCH_CHECK_TYPE(supported_dtype(A.scalar_type()), op,
                   ": A must be float32, float64, complex64, complex128, bfloat16 or float16, got ", A.scalar_type());
  return trtri_out_dtype(A, out_dtype, op);
}

at::Tensor trtri_by_solve(const at::Tensor& A, bool upper, bool unit, at::ScalarType out) {
  if (A.numel() == 0) return at::empty(A.sizes(), A.options().dtype(out));
  const at::Tensor Aw = half_dtype(A.scalar_type()) ? as_float32(A) : A;
  const int64_t k = A.size(-1);
  const at::Tensor I = at::eye(k, Aw.options()).expand(A.sizes());
  at::Tensor X = call_trsm(Aw, I, /*left=*/true, upper, "N", unit, 1);
  // Exact zeros outside the triangle, whatever the pivots made of them.
  X = upper ? X.triu_() : X.tril_();
  return X.to(out);
}

static at::Tensor trtri_cpu(const at::Tensor& A, bool upper, bool unitriangular,
                            std::optional<at::ScalarType> out_dtype) {
  const at::ScalarType out = check_trtri(A, out_dtype, "hsma::trtri");
  return trtri_by_solve(A, upper, unitriangular, out);
}

// Autograd: with no gradient of either kind wanted, the op below autograd (the CUDA kernel); else
// the same inverse as a differentiable solve against an identity, so that trsm's autograd gives
// reverse mode (dX = -X dA X, projected on the triangle), forward mode and the torch.func
// transforms. bfloat16 / float16 A is widened first (differentiably), as the kernels do.
static at::Tensor trtri_autograd(const at::Tensor& A, bool upper, bool unitriangular,
                                 std::optional<at::ScalarType> out_dtype) {
  const bool tangent = A.defined() && A._fw_grad(/*level=*/0).defined();
  if (!torch::autograd::compute_requires_grad(A) && !tangent) {
    static const auto op =
        hsma_op<at::Tensor(const at::Tensor&, bool, bool, std::optional<at::ScalarType>)>("hsma::trtri");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(A, upper, unitriangular, out_dtype);
  }
  // (No size checks beyond the rank: under torch.compile they would specialise the shapes; the solve checks.)
  HSMA_CHECK(A.dim() >= 2, "hsma::trtri: A must have at least 2 dimensions (*, k, k), got shape ", shape(A.sizes()));
  const at::ScalarType out = trtri_out_dtype(A, out_dtype, "hsma::trtri");
  const at::Tensor Aw = half_dtype(A.scalar_type()) ? A.to(at::kFloat) : A;
  // Symbolic sizes, so that torch.compile with dynamic shapes does not specialise on k.
  const at::Tensor I = at::eye_symint(A.sym_size(-1), Aw.options()).expand_symint(A.sym_sizes());
  const at::Tensor X = call_trsm(Aw, I, /*left=*/true, upper, "N", unitriangular, 1);
  return (upper ? X.triu() : X.tril()).to(out);
}

}  // namespace hsma

TORCH_LIBRARY_IMPL(hsma, CPU, m) { m.impl("trtri", &hsma::trtri_cpu); }
TORCH_LIBRARY_IMPL(hsma, Autograd, m) { m.impl("trtri", &hsma::trtri_autograd); }
