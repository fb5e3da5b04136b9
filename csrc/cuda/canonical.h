// The canonical problem of the CUDA backend: every (side, uplo, trans, conj view, batch strides)
// of a call becomes the kernels' lower-triangular left solve L X = alpha B (kernels/trsm_problem.h),
// read in place through signed strides. The executors (exec.h) fill the kernels' problems from it.
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
template <typename KA, typename KB>
void read_backwards(int64_t m, const KA*& L, MatrixRef& l, const KB*& B, MatrixRef& b, KB*& X, MatrixRef& x) {
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

// 3-D views of a solve's operands: A3 (btA, k, k) with btA = 1 when one A serves the whole batch, B3 and X3
// (bt, m, n); X fresh and contiguous.
struct Batched3 {
  at::Tensor A3, B3, X3;
};
Batched3 batched_3d(const at::Tensor& A, const at::Tensor& B, at::Tensor& X, const TrsmShape& s);

// The sweep kernel's canonical problem (L lower, left side) of the 3-D views (batched_3d), without the plan's
// fields.
template <typename K>
SweepProblem<K> sweep_problem(const at::Tensor& A3, const at::Tensor& B3, at::Tensor& X3, const TrsmArgs& args) {
  const Canonical c = canonicalise(args, A3.is_conj());
  SweepProblem<K> p;
  p.m = A3.size(1);
  p.n = args.left ? B3.size(2) : B3.size(1);
  p.batch = B3.size(0);
  const int64_t ar = A3.stride(1), ac = A3.stride(2);
  p.L = reinterpret_cast<const K*>(A3.const_data_ptr());
  p.l = c.transposed ? MatrixRef{ac, ar} : MatrixRef{ar, ac};
  p.l_batch = A3.size(0) == 1 ? 0 : A3.stride(0);
  p.B = reinterpret_cast<const K*>(B3.const_data_ptr());
  p.b = args.left ? MatrixRef{B3.stride(1), B3.stride(2)} : MatrixRef{B3.stride(2), B3.stride(1)};
  p.b_batch = B3.size(0) == 1 ? 0 : B3.stride(0);
  p.X = reinterpret_cast<K*>(X3.data_ptr());
  p.x = args.left ? MatrixRef{X3.stride(1), X3.stride(2)} : MatrixRef{X3.stride(2), X3.stride(1)};
  p.x_batch = X3.stride(0);
  if (!c.lower) read_backwards(p.m, p.L, p.l, p.B, p.b, p.X, p.x);
  p.conj = c.conj;
  p.unit = args.unit;
  p.alpha = to_kernel_scalar<K>(args.alpha);
  return p;
}

}  // namespace hsma
