// torch.ops.hsma.cholesky_solve / cholesky_inverse / lu_solve: the solvers built on trsm, as compositions
// of torch.ops.hsma.trsm (plus, for LU, the pivots' permutation and a gather), registered
// CompositeImplicitAutograd: autograd, forward AD, vmap and torch.compile come from trsm's and ATen's.
// Also torch.ops.hsma._lu_permutation's CPU kernel (its CUDA kernel: csrc/cuda/permutation.cpp).
//
// hsma_trsm/solvers.py checks the arguments with torch's messages and calls these ops; the switch's
// kernels (csrc/ops/switch.cpp) call the same functions below autograd, after checking that torch would
// take the arguments. trsm returns a contiguous result, so a column-major X (torch's layout) is computed as
// the contiguous X^T of the transposed solve (its .mT), never copied.
#include <torch/library.h>

#include <algorithm>

#include "solvers.h"
#include "trsm.h"

namespace hsma {

static bool solvable(const at::Tensor& t) {
  return t.layout() == at::kStrided && t.dim() >= 2 && solver_dtype(t.scalar_type());
}

// NotImplementedError, as torch's solvers raise, for a dtype they have no kernel for (bfloat16, float16, ...).
static void check_solver_dtype(const at::Tensor& t, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(solver_dtype(t.scalar_type()), op, ": no solver for dtype ", t.scalar_type(),
                              " (float32, float64, complex64, complex128, as torch's)");
}

// Batch dims (all but the last two) that broadcast.
static bool broadcasts(c10::IntArrayRef a, c10::IntArrayRef b) {
  for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
    const int64_t x = a[a.size() - i], y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

bool operands_fit(const at::Tensor& A, const at::Tensor& B, int64_t b_dim) {
  return solvable(A) && solvable(B) && A.scalar_type() == B.scalar_type() && A.device() == B.device() &&
         A.size(-1) == A.size(-2) && A.size(-1) == B.size(b_dim) &&
         broadcasts(A.sizes().slice(0, A.dim() - 2), B.sizes().slice(0, B.dim() - 2));
}

bool pivots_fit(const at::Tensor& LU, const at::Tensor& pivots) {
  return pivots.layout() == at::kStrided && pivots.scalar_type() == at::kInt && pivots.device() == LU.device() &&
         LU.dim() >= 2 && pivots.sizes() == LU.sizes().slice(0, LU.dim() - 1);
}

at::Tensor cholesky_solve(const at::Tensor& B, const at::Tensor& L, bool upper) {
  check_solver_dtype(L, "hsma::cholesky_solve");
  if (upper) {  // A = U^H U: U^H Y = B, then U X = Y as X^T U^T = Y^T
    const at::Tensor Y = call_trsm(L, B, true, true, "C", false, 1);
    return call_trsm(L, Y.mT(), false, true, "T", false, 1).mT();
  }
  // A = L L^H: L Y = B, then L^H X = Y as X^T conj(L) = Y^T, conj(L) = op(L^T) with op = 'C'
  const at::Tensor Y = call_trsm(L, B, true, false, "N", false, 1);
  return call_trsm(L.mT(), Y.mT(), false, true, "C", false, 1).mT();
}

at::Tensor cholesky_inverse(const at::Tensor& L, bool upper) {
  check_solver_dtype(L, "hsma::cholesky_inverse");
  const at::Tensor I = at::eye(L.size(-1), L.options());
  return hsma::cholesky_solve(I, L, upper);
}

void check_pivots(const at::Tensor& pivots) {
  HSMA_CHECK(pivots.dim() >= 1 && pivots.scalar_type() == at::kInt, "hsma::_lu_permutation: pivots must be int32 "
             "with at least 1 dimension");
}

at::Tensor lu_permutation_by_unpack(const at::Tensor& pivots, bool inverse) {
  check_pivots(pivots);
  const int64_t k = pivots.size(-1);
  if (k == 0) return at::empty(pivots.sizes(), pivots.options().dtype(at::kLong));
  std::vector<int64_t> sizes = pivots.sizes().vec();
  sizes.push_back(k);
  const at::Tensor dummy = at::zeros({}, pivots.options().dtype(at::kByte)).expand(sizes);
  const at::Tensor P = std::get<0>(at::lu_unpack(dummy, pivots, /*unpack_data=*/false));
  return P.argmax(inverse ? -1 : -2);
}

// torch.ops.hsma._lu_permutation by a typed dispatcher call (CPU: the function above; CUDA: a kernel).
static at::Tensor permutation(const at::Tensor& pivots, bool inverse) {
  static const auto op = hsma_op<at::Tensor(const at::Tensor&, bool)>("hsma::_lu_permutation");
  return op.call(pivots, inverse);
}

// `batch` followed by `tail`.
static std::vector<int64_t> with_tail(std::vector<int64_t> batch, std::initializer_list<int64_t> tail) {
  batch.insert(batch.end(), tail);
  return batch;
}

at::Tensor lu_solve(const at::Tensor& LU, const at::Tensor& pivots, const at::Tensor& B, bool left, bool adjoint) {
  check_solver_dtype(LU, "hsma::lu_solve");
  const int64_t k = LU.size(-1), rows = B.size(-2), cols = B.size(-1);
  // With A = P L U: left, A X = B: X = U^-1 L^-1 P^T B; adjoint: X = P L^-H U^-H B;
  // right, X A = B: X = B U^-1 L^-1 P^T; adjoint: X = B P L^-H U^-H. P^T B gathers B's rows by the
  // permutation perm (P[perm[j], j] = 1), B P its columns; P Y and Z P^T gather by the inverse.
  const std::vector<int64_t> batch =
      at::infer_size(B.sizes().slice(0, B.dim() - 2), LU.sizes().slice(0, LU.dim() - 2));
  const at::Tensor perm = permutation(pivots, /*inverse=*/left == adjoint).expand(with_tail(batch, {k}));
  const at::Tensor Bx = B.expand(with_tail(batch, {rows, cols}));
  if (left && !adjoint) {
    const at::Tensor G = at::gather(Bx, -2, perm.unsqueeze(-1).expand(Bx.sizes()));
    const at::Tensor Y = call_trsm(LU, G, true, false, "N", true, 1);
    return call_trsm(LU, Y.mT(), false, true, "T", false, 1).mT();  // X^T U^T = Y^T
  }
  if (left) {
    const at::Tensor Z = call_trsm(LU, B, true, true, "C", false, 1);
    const at::Tensor Y = call_trsm(LU, Z, true, false, "C", true, 1);
    return at::gather(Y.mT(), -1, perm.unsqueeze(-2).expand(with_tail(batch, {cols, k}))).mT();
  }
  if (!adjoint) {
    const at::Tensor Z = call_trsm(LU, B, false, true, "N", false, 1);
    const at::Tensor W = call_trsm(LU, Z, false, false, "N", true, 1);
    return at::gather(W, -1, perm.unsqueeze(-2).expand(with_tail(batch, {rows, k})));
  }
  const at::Tensor G = at::gather(Bx, -1, perm.unsqueeze(-2).expand(Bx.sizes()));
  const at::Tensor W = call_trsm(LU, G, false, false, "C", true, 1);
  return call_trsm(LU, W, false, true, "C", false, 1);
}

}  // namespace hsma

TORCH_LIBRARY_FRAGMENT(hsma, m) {
  m.def("cholesky_solve(Tensor B, Tensor L, bool upper=False) -> Tensor");
  m.def("cholesky_inverse(Tensor L, bool upper=False) -> Tensor");
  m.def("lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False) -> Tensor");
  m.def("_lu_permutation(Tensor pivots, bool inverse=False) -> Tensor");
}

TORCH_LIBRARY_IMPL(hsma, CPU, m) { m.impl("_lu_permutation", &hsma::lu_permutation_by_unpack); }

TORCH_LIBRARY_IMPL(hsma, CompositeImplicitAutograd, m) {
  m.impl("cholesky_solve", &hsma::cholesky_solve);
  m.impl("cholesky_inverse", &hsma::cholesky_inverse);
  m.impl("lu_solve", &hsma::lu_solve);
}

// Under vmap the compositions decompose too (as ATen's composite ops do), into ops with batch rules: trsm's and
// _lu_permutation's (hsma_trsm/_ops.py) and ATen's.
TORCH_LIBRARY_IMPL(hsma, FuncTorchBatchedDecomposition, m) {
  m.impl("cholesky_solve", &hsma::cholesky_solve);
  m.impl("cholesky_inverse", &hsma::cholesky_inverse);
  m.impl("lu_solve", &hsma::lu_solve);
}
