// CUDA backend of torch.ops.hsma.trtri: real triangles of order k <= 64 (float32, bfloat16, float16
// in float arithmetic, to any of the three; float64 to float64) by the small inverse kernel
// (kernels/tri_inverse.cu), read in place through their strides; the rest by the solve against an
// identity (csrc/ops/inverse.cpp), i.e. the blocked path's inverted diagonal blocks and GEMMs.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "cuda/canonical.h"
#include "overrides.h"
#include "trsm.h"

namespace hsma {
namespace {

// The kernels' stored type for an ATen dtype.
template <typename F> bool with_stored_type(at::ScalarType t, F f) {
  switch (t) {
    case at::kFloat: f(float()); return true;
    case at::kBFloat16: f(bfloat16_bits()); return true;
    case at::kHalf: f(float16_bits()); return true;
    default: return false;
  }
}

template <typename S, typename O>
void run_inverse(const at::Tensor& A_in, at::Tensor& X, bool upper, bool unit, int64_t max_blocks) {
  at::Tensor A = A_in;
  const std::vector<int64_t> batch(A.sizes().begin(), A.sizes().end() - 2);
  InverseProblem<S, O> p;
  std::vector<int64_t> strides[3] = {batch_strides(A, batch), std::vector<int64_t>(batch.size(), 0),
                                     batch_strides(X, batch)};
  if (!collapse_batch(batch, strides, p.bl)) {  // more than kMaxBatchDims non-mergeable batch dims
    A = A.contiguous();
    strides[0] = batch_strides(A, batch);
    HSMA_CHECK(collapse_batch(batch, strides, p.bl), "hsma::trtri: internal error: batch layout");
  }
  p.k = A.size(-1);
  p.batch = X.numel() / (p.k * p.k);
  p.L = reinterpret_cast<const S*>(A.const_data_ptr());
  p.l = {A.stride(-2), A.stride(-1)};
  p.X = reinterpret_cast<O*>(X.data_ptr());
  p.x = {X.stride(-2), X.stride(-1)};
  if (upper) {  // an upper triangle read from its last element backwards is a lower one; so is its inverse
    p.L += (p.k - 1) * (p.l.row + p.l.col);
    p.l = {-p.l.row, -p.l.col};
    p.X += (p.k - 1) * (p.x.row + p.x.col);
    p.x = {-p.x.row, -p.x.col};
  }
  p.unit = unit;
  p.max_blocks = max_blocks;
  check_launch(launch_tri_inverse<S, O>(p, c10::cuda::getCurrentCUDAStream()), "launching the inverse kernel");
}

// The inverse kernel's dtypes: float32 / bfloat16 / float16 to any of the three, float64 to float64.
bool kernel_takes(at::ScalarType in, at::ScalarType out) {
  if (in == at::kDouble || out == at::kDouble) return in == out;
  return !at::isComplexType(in) && !at::isComplexType(out);
}

// The kernel or the solve against an identity for a k x k triangle (the override `inverse` forces one
// where both apply).
bool use_inverse_kernel(int64_t k, at::ScalarType in, at::ScalarType out, int forced) {
  if (k > kInverseMaxK || !kernel_takes(in, out)) return false;
  return forced < 0 || forced == 1;
}

at::Tensor trtri_cuda(const at::Tensor& A_in, bool upper, bool unitriangular,
                      std::optional<at::ScalarType> out_dtype) {
  const at::ScalarType out = check_trtri(A_in, out_dtype, "hsma::trtri");
  const c10::cuda::CUDAGuard guard(A_in.device());
  const at::Tensor A = A_in.resolve_neg();
  const at::ScalarType in = A.scalar_type();
  const Overrides& ov = overrides();  // (read once: inverse, max_blocks)
  if (!use_inverse_kernel(A.size(-1), in, out, ov.inverse)) return trtri_by_solve(A, upper, unitriangular, out);
  const int64_t max_blocks = ov.small.max_blocks;
  at::Tensor X = at::empty(A.sizes(), A.options().dtype(out));
  if (X.numel() == 0) return X;
  if (in == at::kDouble) {
    run_inverse<double, double>(A, X, upper, unitriangular, max_blocks);
  } else {
    with_stored_type(in, [&](auto s) {
      with_stored_type(out, [&](auto o) {
        run_inverse<decltype(s), decltype(o)>(A, X, upper, unitriangular, max_blocks);
      });
    });
  }
  return X;
}

}  // namespace
}  // namespace hsma

TORCH_LIBRARY_IMPL(hsma, CUDA, m) { m.impl("trtri", &hsma::trtri_cuda); }
