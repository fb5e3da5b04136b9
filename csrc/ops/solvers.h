// The solvers built on trsm (csrc/ops/solvers.cpp): compositions of torch.ops.hsma.trsm, called by the ops
// torch.ops.hsma.cholesky_solve / cholesky_inverse / lu_solve and by the switch's kernels
// (csrc/ops/switch.cpp). They take arguments already checked (shapes, dtypes, devices, pivots) and return
// torch's layout: column-major matrices, except lu_solve with left=False (row-major).
#pragma once
#include <ATen/ATen.h>

namespace hsma {

// Operands that torch's solvers and these both take as given: A (*, k, k) and B strided, on one device, of one
// dtype among float32, float64, complex64 and complex128, k == B.size(b_dim), batch dims that broadcast.
bool operands_fit(const at::Tensor& A, const at::Tensor& B, int64_t b_dim);
// LU's pivots as torch.linalg.lu_solve takes them: int32, strided, LU's device and batch shape, k per entry.
bool pivots_fit(const at::Tensor& LU, const at::Tensor& pivots);

// torch.cholesky_solve(B, L, upper): A X = B with A = L L^H (or U^H U).
at::Tensor cholesky_solve(const at::Tensor& B, const at::Tensor& L, bool upper);
// torch.cholesky_inverse(L, upper): cholesky_solve against the identity.
at::Tensor cholesky_inverse(const at::Tensor& L, bool upper);
// torch.linalg.lu_solve(LU, pivots, B, left=, adjoint=), A = P L U from torch.linalg.lu_factor.
at::Tensor lu_solve(const at::Tensor& LU, const at::Tensor& pivots, const at::Tensor& B, bool left, bool adjoint);

// torch.ops.hsma._lu_permutation(pivots, inverse): (*, k) int64 perm with P[perm[j], j] = 1 for the P of
// LAPACK's pivots (*, k) int32 (A = P L U), or with `inverse` its inverse. This one is the CPU kernel, and the
// CUDA kernel's for orders above its own: at::lu_unpack applies the interchanges in order, as LAPACK does,
// into a k x k uint8 P per batch entry, and its argmax is the permutation. No host sync (CUDA graphs).
at::Tensor lu_permutation_by_unpack(const at::Tensor& pivots, bool inverse);
// torch.ops.hsma._lu_permutation's argument check (RuntimeError): int32 pivots with at least one dimension.
void check_pivots(const at::Tensor& pivots);

}  // namespace hsma
