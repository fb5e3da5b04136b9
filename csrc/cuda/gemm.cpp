// GEMMs of the blocked path (gemm.h): cuBLAS directly where its headers are (a CUDA toolkit);
// without them (a compile check against a CPU torch and a bare nvcc) and on ROCm, ATen's GEMMs.
#include "cuda/gemm.h"

#if !defined(USE_ROCM) && __has_include(<cublas_v2.h>)
#define HSMA_DIRECT_CUBLAS 1
#include <ATen/cuda/CUDAContext.h>
#else
#define HSMA_DIRECT_CUBLAS 0
#endif

#include <algorithm>
#include <limits>

#include "trsm.h"

namespace hsma {
namespace {

// D = alpha * A @ B + beta * D through ATen; A may have batch 1 (broadcast).
void aten_gemm_into(const StridedView& Dv, const c10::Scalar& alpha, const StridedView& Av, const StridedView& Bv,
                    const c10::Scalar& beta) {
  at::Tensor D = Dv.tensor();
  const at::Tensor A = Av.tensor(), B = Bv.tensor();
  const int64_t batch = D.size(0);
  if (batch == 1) {
    at::Tensor d = D.select(0, 0);
    d.addmm_(A.select(0, 0), B.select(0, 0), beta, alpha);
    return;
  }
  D.baddbmm_(A.size(0) == batch ? A : A.expand({batch, A.size(1), A.size(2)}), B, beta, alpha);
}

#if HSMA_DIRECT_CUBLAS
// cuBLAS's view of an r x c matrix with strides (rs, cs) and an optional conjugate: op(X) for a
// column-major X with leading dimension ld; false if none fits.
struct BlasOperand {
  cublasOperation_t op;
  int64_t ld;
};
bool blas_operand(int64_t r, int64_t c, int64_t rs, int64_t cs, bool conj, BlasOperand& o) {
  if (!conj && (rs == 1 || r == 1)) {  // column-major: X = M
    const int64_t ld = c == 1 ? std::max<int64_t>(r, 1) : cs;
    if (ld >= std::max<int64_t>(r, 1)) { o = {CUBLAS_OP_N, ld}; return true; }
  }
  if (cs == 1 || c == 1) {  // row-major: X = M^T, column-major
    const int64_t ld = r == 1 ? std::max<int64_t>(c, 1) : rs;
    if (ld >= std::max<int64_t>(c, 1)) { o = {conj ? CUBLAS_OP_C : CUBLAS_OP_T, ld}; return true; }
  }
  return false;
}

template <typename S> struct BlasCall;
template <> struct BlasCall<float> {
  using T = float;
  static constexpr auto strided = cublasSgemmStridedBatched;
};
template <> struct BlasCall<double> {
  using T = double;
  static constexpr auto strided = cublasDgemmStridedBatched;
};
template <> struct BlasCall<c10::complex<float>> {
  using T = cuComplex;
  static constexpr auto strided = cublasCgemmStridedBatched;
};
template <> struct BlasCall<c10::complex<double>> {
  using T = cuDoubleComplex;
  static constexpr auto strided = cublasZgemmStridedBatched;
};

// D = alpha * A @ B + beta * D by one strided-batched cuBLAS call; false if the layouts do not fit.
template <typename S>
bool blas_gemm_into(const StridedView& D, const c10::Scalar& alpha, const StridedView& A, const StridedView& B,
                    const c10::Scalar& beta, BlasHandle& h) {
  using T = typename BlasCall<S>::T;
  // Operands as (data, rows, cols, row stride, col stride, batch stride, conj of the stored
  // values). D must be column-major, or its transpose is, and then D^T = B^T A^T is computed.
  struct M { const void* p; int64_t r, c, rs, cs, bs; bool conj; };
  auto desc = [](const StridedView& v) {
    return M{static_cast<const char*>(v.base.const_data_ptr()) + v.offset * v.base.element_size(), v.r, v.c, v.rs,
             v.cs, v.batch == 1 ? 0 : v.bs, v.conj != v.base.is_conj()};
  };
  const int64_t batch = D.batch, k = A.c;
  M a = desc(A), b = desc(B), d = desc(D);
  if (d.conj) return false;
  if (!(d.rs == 1 || d.r == 1)) {
    if (!(d.cs == 1 || d.c == 1)) return false;
    auto tr = [](const M& x) { return M{x.p, x.c, x.r, x.cs, x.rs, x.bs, x.conj}; };
    const M a_new = tr(b), b_new = tr(a);
    a = a_new;
    b = b_new;
    d = tr(d);
  }
  const int64_t m = d.r, n = d.c, ldd = d.c == 1 ? std::max<int64_t>(d.r, 1) : d.cs;
  BlasOperand oa, ob;
  if (!blas_operand(a.r, a.c, a.rs, a.cs, a.conj, oa) || !blas_operand(b.r, b.c, b.rs, b.cs, b.conj, ob)) return false;
  const int64_t kMax = std::numeric_limits<int>::max();
  if (m > kMax || n > kMax || k > kMax || batch > kMax || oa.ld > kMax || ob.ld > kMax || ldd > kMax ||
      ldd < std::max<int64_t>(m, 1) || (batch > 1 && d.bs == 0))
    return false;
  if (m == 0 || n == 0 || batch == 0) return true;
  const S al = alpha.to<S>(), be = beta.to<S>();
  if (h.handle == nullptr) h.handle = at::cuda::getCurrentCUDABlasHandle();
  cublasHandle_t handle = static_cast<cublasHandle_t>(h.handle);
  const cublasStatus_t st = BlasCall<S>::strided(
      handle, oa.op, ob.op, int(m), int(n), int(k), reinterpret_cast<const T*>(&al),
      reinterpret_cast<const T*>(a.p), int(oa.ld), a.bs, reinterpret_cast<const T*>(b.p), int(ob.ld), b.bs,
      reinterpret_cast<const T*>(&be), reinterpret_cast<T*>(const_cast<void*>(d.p)), int(ldd), d.bs, int(batch));
  HSMA_CHECK(st == CUBLAS_STATUS_SUCCESS, "hsma::trsm: cuBLAS GEMM failed (status ", static_cast<int>(st), ")");
  return true;
}
#endif

}  // namespace

// D = alpha * A @ B + beta * D for 3-D views (batch, rows, cols); A may have batch 1 (broadcast).
// With beta = 0, D's old values are never read.
template <typename S>
void gemm_into(const StridedView& D, const c10::Scalar& alpha, const StridedView& A, const StridedView& B,
               const c10::Scalar& beta, BlasHandle& h) {
#if HSMA_DIRECT_CUBLAS
  if (!h.aten && blas_gemm_into<S>(D, alpha, A, B, beta, h)) return;
#endif
  aten_gemm_into(D, alpha, A, B, beta);
}

#define HSMA_INSTANTIATE(S)                                                                                 \
  template void gemm_into<S>(const StridedView&, const c10::Scalar&, const StridedView&, const StridedView&, \
                             const c10::Scalar&, BlasHandle&);
HSMA_FOR_EACH_DTYPE(HSMA_INSTANTIATE)
#undef HSMA_INSTANTIATE

}  // namespace hsma
