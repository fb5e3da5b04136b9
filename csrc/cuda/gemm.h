// GEMMs of the blocked path (gemm.cpp). The solve makes many small GEMMs, so their host cost
// matters (orders of a few hundred: the GEMMs take microseconds of GPU time each). On CUDA they go
// to cuBLAS directly, on the handle (stream, workspace, math mode) that ATen keeps for the current
// stream: no dispatcher, output allocation or layout checks per call. A layout cuBLAS cannot take (a
// conjugated column-major operand, an output with no unit stride, sizes beyond int) falls back to
// ATen's baddbmm, as do ROCm and builds without the cuBLAS headers; the override aten_gemm=1
// forces ATen's path (for comparisons; the plan carries it in the handle).
#pragma once
#include <ATen/ATen.h>

namespace hsma {

// A 3-D strided view (batch, rows, cols) of a tensor's storage: element (b, i, j) at base's data +
// offset + b * bs + i * rs + j * cs. conj: the view holds the conjugates of base's values. The
// cuBLAS path reads pointers and strides from it; only ATen's path makes it a tensor (as_strided),
// so a GEMM between views of a workspace creates no tensors.
struct StridedView {
  at::Tensor base;
  int64_t offset = 0, batch = 1, r = 0, c = 0, bs = 0, rs = 0, cs = 0;
  bool conj = false;
  bool whole = false;  // the view is base itself

  static StridedView of(const at::Tensor& t3) {
    return {t3, 0, t3.size(0), t3.size(1), t3.size(2), t3.size(0) == 1 ? 0 : t3.stride(0), t3.stride(1),
            t3.stride(2), false, true};
  }
  at::Tensor tensor() const {
    if (whole) return base;
    const at::Tensor plain = base.is_conj() ? base.conj() : base;  // the stored values, no conj bit
    at::Tensor v = plain.as_strided({batch, r, c}, {bs, rs, cs}, plain.storage_offset() + offset);
    return conj != base.is_conj() ? v.conj() : v;
  }
};

// cuBLAS's handle for the GEMMs of one solve, fetched from ATen on first use (its getter sets the
// stream, workspace and math mode on every call; the solve runs on one stream); `aten`: every GEMM by
// ATen instead (the plan's aten_gemm).
struct BlasHandle {
  void* handle = nullptr;
  bool aten = false;
};

// D = alpha * A @ B + beta * D for 3-D views (batch, rows, cols); A may have batch 1 (broadcast).
// With beta = 0, D's old values are never read.
template <typename S>
void gemm_into(const StridedView& D, const c10::Scalar& alpha, const StridedView& A, const StridedView& B,
               const c10::Scalar& beta, BlasHandle& h);

}  // namespace hsma
