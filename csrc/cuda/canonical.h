// The canonical problem of the CUDA backend: every (side, uplo, trans, conj view, batch strides)
// of a call becomes the kernels' lower-triangular left solve L X = alpha B (kernels/trsm_problem.h),
// read in place through signed strides. small_solve fills the small kernels' SolveProblem from it;
// the blocked path (blocked.h) reads the same Canonical form.
#pragma once
#include <ATen/ATen.h>

#include <type_traits>
#include <vector>

#include "kernels/trsm_problem.h"
#include "trsm.h"

namespace hsma {

// The kernels' scalar type for ATen's.
template <typename S> struct kernel_type { using type = S; };
template <> struct kernel_type<c10::complex<float>> { using type = complex<float>; };
template <> struct kernel_type<c10::complex<double>> { using type = complex<double>; };

// Raises RuntimeError naming `what` when a launch (or a runtime call) failed.
void check_launch(hsmaError_t err, const char* what);

// The canonical form: T = op(A) for a left solve, op(A)^T for a right one (so that the solve is
// always T X' = alpha B' with X' = X or X^T), read through strides.
struct Canonical {
  bool transposed;  // T(i, j) = A(j, i)
  bool conj;        // T holds conj(A)'s values
  bool lower;       // T is lower triangular
};

Canonical canonicalise(const TrsmArgs& args, bool a_is_conj);

// A c10::Scalar as the kernels' scalar type K.
template <typename K> inline K to_kernel_scalar(const c10::Scalar& s) {
  if constexpr (std::is_same_v<K, float> || std::is_same_v<K, double>) {
    return static_cast<K>(s.to<double>());
  } else {
    using R = typename real_of<K>::type;
    const auto z = s.to<c10::complex<double>>();
    return K(static_cast<R>(z.real()), static_cast<R>(z.imag()));
  }
}

// An upper triangle read from its last element backwards is a lower one (L(i, j) at
// L + i * l.row + j * l.col); B's and X's rows are then read backwards too.
template <typename K>
void read_backwards(int64_t m, const K*& L, MatrixRef& l, const K*& B, MatrixRef& b, K*& X, MatrixRef& x) {
  L += (m - 1) * (l.row + l.col);
  l = {-l.row, -l.col};
  B += (m - 1) * b.row;
  b.row = -b.row;
  X += (m - 1) * x.row;
  x.row = -x.row;
}

// Strides of t's batch dims broadcast to `batch` (0 where t is broadcast), without a view op.
std::vector<int64_t> batch_strides(const at::Tensor& t, const std::vector<int64_t>& batch);
// Merges the batch dims of three tensors (L, B, X strides) into at most kMaxBatchDims; false if impossible.
bool collapse_batch(const std::vector<int64_t>& sizes, const std::vector<int64_t> (&strides)[3], BatchLayout& bl);

// The solve of (A, B) for orders k <= kSmallMaxM into X (fresh, B itself in place, or a view;
// strided): one launch of the small kernels for the whole batch (S: ATen's scalar type). The
// small-path overrides (overrides.h) are applied here.
template <typename S>
void small_solve(const at::Tensor& A, const at::Tensor& B, at::Tensor& X, const TrsmArgs& args,
                 const TrsmShape& s);

}  // namespace hsma
