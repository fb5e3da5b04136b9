// CUDA (and, hipified, ROCm) backend of torch.ops.hsma.trsm: normalises every
// (side, uplo, trans, diag, strides, conj view) into the kernels' canonical lower-triangular
// left solve, then chooses
//   - the small path (A's order k <= 64): one launch of the shared-memory direct solve for the
//     whole batch, reading A and B in place through their strides (broadcast A never copied);
//   - the blocked path (k > 64): one launch inverts every NB x NB diagonal block, then a
//     recursive split (X1 = solve(T11, B1); B2 -= T21 X1; X2 = solve(T22, B2)) whose leaves are
//     GEMMs with the inverted blocks; all GEMMs through ATen (cuBLAS / hipBLAS).
// Everything runs on torch's current stream; nothing synchronises with the host.
#include <c10/cuda/CUDAStream.h>
// cuBLAS for the blocked path's GEMMs where its headers are (a CUDA toolkit); without them (a
// compile check against a CPU torch and a bare nvcc) and on ROCm, ATen's GEMMs.
#if !defined(USE_ROCM) && __has_include(<cublas_v2.h>)
#define HSMA_DIRECT_CUBLAS 1
#include <ATen/cuda/CUDAContext.h>
#else
#define HSMA_DIRECT_CUBLAS 0
#endif
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "blocking.h"
#include "kernels/trsm_problem.h"
#include "overrides.h"
#include "trsm.h"

namespace hsma {
namespace {

template <typename S> struct kernel_type { using type = S; };
template <> struct kernel_type<c10::complex<float>> { using type = complex<float>; };
template <> struct kernel_type<c10::complex<double>> { using type = complex<double>; };

template <typename K> K to_kernel_scalar(const c10::Scalar& s) {
  if constexpr (std::is_same_v<K, float> || std::is_same_v<K, double>) {
    return static_cast<K>(s.to<double>());
  } else {
    using R = typename real_of<K>::type;
    const auto z = s.to<c10::complex<double>>();
    return K(static_cast<R>(z.real()), static_cast<R>(z.imag()));
  }
}

void check_launch(hsmaError_t err, const char* what) {
  HSMA_CHECK(err == hsmaSuccess, "hsma::trsm: ", what, " failed: ", hsmaGetErrorString(err));
}

// Strides of t's batch dims broadcast to `batch` (0 where t is broadcast), without a view op.
std::vector<int64_t> batch_strides(const at::Tensor& t, const std::vector<int64_t>& batch) {
  std::vector<int64_t> st(batch.size(), 0);
  const int64_t tb = t.dim() - 2, off = static_cast<int64_t>(batch.size()) - tb;
  for (int64_t d = 0; d < tb; ++d)
    if (t.size(d) != 1) st[off + d] = t.stride(d);
  return st;
}

// Merges the batch dims of the three tensors (L, B, X strides) into at most kMaxBatchDims;
// false if impossible.
bool collapse_batch(const std::vector<int64_t>& sizes, const std::vector<int64_t> (&strides)[3], BatchLayout& bl) {
  struct Dim { int64_t size, st[3]; };
  Dim dims[kMaxBatchDims + 1];
  int nd = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    const Dim dim{sizes[d], {strides[0][d], strides[1][d], strides[2][d]}};
    if (nd > 0) {
      Dim& prev = dims[nd - 1];
      bool mergeable = true;
      for (int t = 0; t < 3; ++t) mergeable = mergeable && prev.st[t] == dim.st[t] * dim.size;
      if (mergeable) {
        prev.size *= dim.size;
        for (int t = 0; t < 3; ++t) prev.st[t] = dim.st[t];
        continue;
      }
    }
    if (nd == kMaxBatchDims) return false;
    dims[nd++] = dim;
  }
  bl.ndim = nd;
  for (int d = 0; d < nd; ++d) {
    bl.size[d] = dims[d].size;
    for (int t = 0; t < 3; ++t) bl.stride[t][d] = dims[d].st[t];
  }
  return true;
}

// The canonical form: T = op(A) for a left solve, op(A)^T for a right one (so that the solve is
// always T X' = alpha B' with X' = X or X^T), read through strides.
struct Canonical {
  bool transposed;  // T(i, j) = A(j, i)
  bool conj;        // T holds conj(A)'s values
  bool lower;       // T is lower triangular
};

Canonical canonicalise(const TrsmArgs& args, bool a_is_conj) {
  Canonical c;
  c.transposed = (args.trans != Trans::kN) == args.left;
  c.conj = (args.trans == Trans::kC) != a_is_conj;
  c.lower = (!args.upper) != c.transposed;
  return c;
}

// Name and compute capability of the current device, queried once per device.
const GpuIdentity& device_identity() {
  static std::mutex mutex;
  static std::map<int, GpuIdentity> cache;
  int dev = 0;
  check_launch(cudaGetDevice(&dev), "device query");
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(dev);
  if (it == cache.end()) {
    cudaDeviceProp prop;
    check_launch(cudaGetDeviceProperties(&prop, dev), "device query");
    const std::string capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    it = cache.emplace(dev, GpuIdentity{prop.name, capability}).first;
  }
  return it->second;
}

// The host constants of blocking.h against the kernels' own.
static_assert(kDirectLeafMaxNB == kSmallMaxM && kDiagInverseMaxNBHost == kDiagInverseMaxNB,
              "blocking.h's limits must be the kernels' (kernels/trsm_problem.h)");

// The small-path overrides as SolveProblem's fields (SmallKernelName has SmallKernel's order).
static_assert(int(SmallKernelName::kColumns) == int(SmallKernel::kColumns) &&
              int(SmallKernelName::kSegments) == int(SmallKernel::kSegments) &&
              int(SmallKernelName::kPipeline) == int(SmallKernel::kPipeline) &&
              int(SmallKernelName::kWarpTasks) == int(SmallKernel::kWarpTasks) &&
              int(SmallKernelName::kTiles) == int(SmallKernel::kTiles) &&
              int(SmallKernelName::kMma) == int(SmallKernel::kMma),
              "SmallKernelName (overrides.h) must list SmallKernel's kernels in its order");
template <typename K>
void apply_overrides(SolveProblem<K>& p, const Overrides& o) {
  p.kernel = static_cast<SmallKernel>(o.small_kernel);
  p.segment_lanes = o.segment_lanes;
  p.segment_rows = o.segment_rows;
  p.segment_steps = o.segment_steps;
  p.column_rows = o.column_rows;
  p.mma_warps = o.mma_warps;
  p.mma_fold = o.mma_fold;
  p.async_copy = o.async_copy;
  p.dependent_launch = o.pdl;
  p.max_blocks = o.max_blocks;
}

template <typename S>
void small_solve(const at::Tensor& A, const at::Tensor& B, at::Tensor& X, const TrsmArgs& args,
                 const TrsmShape& s) {
  using K = typename kernel_type<S>::type;
  SolveProblem<K> p;
  at::Tensor Ae = A, Be = B;  // read in place through broadcast strides
  const std::vector<int64_t> strides[3] = {batch_strides(A, s.batch), batch_strides(B, s.batch),
                                           batch_strides(X, s.batch)};
  if (!collapse_batch(s.batch, strides, p.bl)) {
    // More than kMaxBatchDims non-mergeable batch dims: solve batch-contiguous copies (a
    // contiguous copy of a conj view holds the conjugated values, without the conj bit).
    std::vector<int64_t> a_shape = s.batch, b_shape = s.batch;
    a_shape.push_back(s.k); a_shape.push_back(s.k);
    b_shape.push_back(s.m); b_shape.push_back(s.n);
    Ae = A.expand(a_shape).contiguous();
    Be = B.expand(b_shape).contiguous();
    if (!X.is_contiguous()) {  // the in-place form into a strided B: solve into a temporary
      at::Tensor Xc = at::empty(s.result, X.options());
      small_solve<S>(Ae, Be, Xc, args, s);
      X.copy_(Xc);
      return;
    }
    const std::vector<int64_t> cstrides[3] = {batch_strides(Ae, s.batch), batch_strides(Be, s.batch),
                                              batch_strides(X, s.batch)};
    HSMA_CHECK(collapse_batch(s.batch, cstrides, p.bl), "hsma::trsm: internal error: batch layout");
  }
  const Canonical c = canonicalise(args, Ae.is_conj());  // after the copies above
  const int64_t ar = Ae.stride(-2), ac = Ae.stride(-1);
  p.m = s.k;
  p.n = args.left ? s.n : s.m;
  p.batch = s.batch_numel();
  p.L = reinterpret_cast<const K*>(Ae.const_data_ptr());
  p.l = c.transposed ? MatrixRef{ac, ar} : MatrixRef{ar, ac};
  p.B = reinterpret_cast<const K*>(Be.const_data_ptr());
  p.b = args.left ? MatrixRef{Be.stride(-2), Be.stride(-1)} : MatrixRef{Be.stride(-1), Be.stride(-2)};
  p.X = reinterpret_cast<K*>(X.data_ptr());
  p.x = args.left ? MatrixRef{X.stride(-2), X.stride(-1)} : MatrixRef{X.stride(-1), X.stride(-2)};
  p.conj = c.conj;
  p.unit = args.unit;
  p.alpha = to_kernel_scalar<K>(args.alpha);
  const Overrides& o = overrides();
  if (o.small_forced) apply_overrides(p, o);  // (else SolveProblem's defaults: the launcher's choices)
  if (!c.lower) {  // read the upper triangle backwards: a lower one
    p.L += (p.m - 1) * (p.l.row + p.l.col);
    p.l = {-p.l.row, -p.l.col};
    p.B += (p.m - 1) * p.b.row;
    p.b.row = -p.b.row;
    p.X += (p.m - 1) * p.x.row;
    p.x.row = -p.x.row;
  }
  check_launch(launch_small_solve<K>(p, c10::cuda::getCurrentCUDAStream()), "launching the small-solve kernel");
}

// ---------------------------------------------------------------------------------------------
// GEMMs of the blocked path. The solve makes many small GEMMs, so their host cost matters (orders
// of a few hundred: the GEMMs take microseconds of GPU time each). On CUDA they go to cuBLAS
// directly, on the handle (stream, workspace, math mode) that ATen keeps for the current stream:
// no dispatcher, output allocation or layout checks per call. A layout cuBLAS cannot take (a
// conjugated column-major operand, an output with no unit stride, sizes beyond int) falls back to
// ATen's baddbmm, as do ROCm and builds without the cuBLAS headers; the override aten_gemm=1
// forces ATen's path (for comparisons).

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
// stream, workspace and math mode on every call; the solve runs on one stream).
struct BlasHandle {
  void* handle = nullptr;
};

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

// D = alpha * A @ B + beta * D for 3-D views (batch, rows, cols); A may have batch 1 (broadcast).
// With beta = 0, D's old values are never read.
template <typename S>
void gemm_into(const StridedView& D, const c10::Scalar& alpha, const StridedView& A, const StridedView& B,
               const c10::Scalar& beta, BlasHandle& h) {
#if HSMA_DIRECT_CUBLAS
  if (!overrides().aten_gemm && blas_gemm_into<S>(D, alpha, A, B, beta, h)) return;
#endif
  aten_gemm_into(D, alpha, A, B, beta);
}

// beta * C + alpha * A @ B, a new tensor (rows contiguous).
template <typename S>
at::Tensor gemm(const at::Tensor& C, const c10::Scalar& beta, const at::Tensor& A, const at::Tensor& B,
                const c10::Scalar& alpha, BlasHandle& h) {
  at::Tensor D = at::empty(C.sizes(), C.options());
  D.copy_(C);
  gemm_into<S>(StridedView::of(D), alpha, StridedView::of(A), StridedView::of(B), beta, h);
  return D;
}

// Doubling from IB x IB to NB x NB inverses, in the tile layout of blocked_solve (one batch entry):
// for s = IB, 2 IB, ..., NB / 2, each pair of adjacent s-blocks on the diagonal
//   lower [[A, 0], [C, B]]: inv21 = -inv(B) C inv(A);   upper [[A, C], [0, B]]: inv12 = -inv(A) C inv(B),
// as strided-batched GEMMs over all full pairs, plus plain GEMMs for a last partial pair.
template <typename S>
void combine_inverse_tiles(at::Tensor& inv, const at::Tensor& A3, const Canonical& c, int64_t k, int64_t nb,
                           int64_t ib, BlasHandle& h) {
  // T's blocks as views of A3 (conj: T holds conj of A3's plain values), the inverse tiles as views
  // of inv, and one workspace for the products C inv(.) of every level.
  const int64_t rT = c.transposed ? A3.stride(2) : A3.stride(1), cT = c.transposed ? A3.stride(1) : A3.stride(2);
  const int64_t d = nb + 1;
  int64_t work = 0;
  for (int64_t s = ib; s < nb; s *= 2) work = std::max(work, std::max<int64_t>(k / (2 * s), 1) * s * s);
  const at::Tensor tmp_buf = at::empty({work}, inv.options());
  const bool t_conj = c.conj != A3.is_conj();
  auto tview = [&](int64_t cnt, int64_t r, int64_t cc, int64_t bs, int64_t off) {
    return StridedView{A3, off, cnt, r, cc, bs, rT, cT, t_conj, false};
  };
  auto iview = [&](int64_t cnt, int64_t r, int64_t cc, int64_t bs, int64_t off) {
    return StridedView{inv, off, cnt, r, cc, bs, nb, 1, false, false};
  };
  auto tmp = [&](int64_t cnt, int64_t r, int64_t cc) {
    return StridedView{tmp_buf, 0, cnt, r, cc, r * cc, cc, 1, false, false};
  };
  for (int64_t s = ib; s < nb; s *= 2) {
    // Full pairs as batches, then a last pair with a shorter second block (batch 1, s2 < s).
    const int64_t npairs = k / (2 * s), r0 = npairs * 2 * s, s2 = k - r0 - s;
    const int64_t ps = 2 * s * d, pa = 2 * s * (rT + cT);
    for (int part = 0; part < 2; ++part) {
      const int64_t cnt = part == 0 ? npairs : (s2 > 0 ? 1 : 0), q = part == 0 ? s : s2;
      if (cnt == 0) continue;
      const int64_t o = part == 0 ? 0 : r0;  // first row of the (first) pair
      const StridedView I11 = iview(cnt, s, s, ps, o * d), I22 = iview(cnt, q, q, ps, (o + s) * d);
      if (c.lower) {  // inv21 = -inv(B) C inv(A), C = T[o+s : o+s+q, o : o+s]
        const StridedView W = tmp(cnt, q, s);
        gemm_into<S>(W, 1, tview(cnt, q, s, pa, (o + s) * rT + o * cT), I11, 0, h);
        gemm_into<S>(iview(cnt, q, s, ps, o * d + s * nb), -1, I22, W, 0, h);
      } else {  // inv12 = -inv(A) C inv(B), C = T[o : o+s, o+s : o+s+q]
        const StridedView W = tmp(cnt, s, q);
        gemm_into<S>(W, 1, tview(cnt, s, q, pa, o * rT + (o + s) * cT), I22, 0, h);
        gemm_into<S>(iview(cnt, s, q, ps, o * d + s), -1, I11, W, 0, h);
      }
    }
  }
}

template <typename S>
void blocked_solve(const at::Tensor& A, const at::Tensor& B, at::Tensor& X, const TrsmArgs& args,
                   const TrsmShape& s) {
  using K = typename kernel_type<S>::type;
  const int64_t k = s.k, bt = s.batch_numel();
  // 3-D views: A (btA, k, k) with btA = 1 when A is shared by the whole batch.
  const auto a_batch = A.sizes().slice(0, A.dim() - 2);
  int64_t a_numel = 1;
  for (auto v : a_batch) a_numel *= v;
  std::vector<int64_t> a_shape = s.batch, b_shape = s.batch;
  a_shape.push_back(k); a_shape.push_back(k);
  b_shape.push_back(s.m); b_shape.push_back(s.n);
  const at::Tensor A3 = a_numel == 1 ? A.reshape({1, k, k}) : A.expand(a_shape).reshape({bt, k, k});
  const at::Tensor B3 = B.expand(b_shape).reshape({bt, s.m, s.n});
  at::Tensor X3 = X.view({bt, s.m, s.n});
  const Canonical c = canonicalise(args, A3.is_conj());

  // NB, variant and IB: the block plan (csrc/blocking.h).
  const BlockedShape shape{A.scalar_type(), k, (args.left ? s.n : s.m) * bt, A3.size(0) == 1};
  const BlockPlan plan = plan_blocking(device_identity(), shape, overrides());
  const int64_t nb = plan.nb, ib = plan.ib;
  const int64_t nblk = (k + nb - 1) / nb;
  const bool direct_leaves = plan.direct_leaves();
  // Inverses of T's diagonal blocks: tile b of batch entry e at inv[e][b * tile], row pitch NB,
  // tiles NB * (NB + 1) apart. With that spacing the IB x IB diagonal tiles of all blocks, and
  // the block pairs combined at each doubling level below, are equally spaced along the
  // diagonal, so each level is one strided-batched GEMM over the whole matrix.
  const int64_t tile = nb * (nb + 1);
  BlasHandle blas;
  at::Tensor inv;
  if (!direct_leaves) {
    // One launch inverts every diagonal tile of order ib (the decoupled O(IB)-shared-memory
    // kernel); with ib < nb, GEMM doubling then builds the NB x NB inverses from them.
    inv = at::empty({A3.size(0), nblk * tile}, A3.options());
    if (ib < nb)  // the doubling fills the tiles' off-diagonal blocks below (above) the diagonal only
      check_launch(cudaMemsetAsync(inv.data_ptr(), 0, inv.nbytes(), c10::cuda::getCurrentCUDAStream()),
                   "zeroing the inverse tiles");
    DiagInverseProblem<K> p;
    p.m = k;
    p.nb = ib;
    p.batch = A3.size(0);
    p.A = reinterpret_cast<const K*>(A3.const_data_ptr());
    p.a = c.transposed ? MatrixRef{A3.stride(2), A3.stride(1)} : MatrixRef{A3.stride(1), A3.stride(2)};
    p.a_batch_stride = A3.stride(0);
    p.out = reinterpret_cast<K*>(inv.data_ptr());
    p.out_pitch = nb;
    p.out_block_stride = ib * (nb + 1);
    p.out_batch_stride = nblk * tile;
    p.upper = !c.lower;
    p.conj = c.conj;
    p.unit = args.unit;
    check_launch(launch_diag_inverse<K>(p, c10::cuda::getCurrentCUDAStream()), "launching the diagonal-block inverse kernel");
    if (ib < nb) combine_inverse_tiles<S>(inv, A3, c, k, nb, ib, blas);
  }

  // T as an ATen view (conj views are handled by cuBLAS or resolved by ATen as needed).
  at::Tensor T = c.transposed ? A3.mT() : A3;
  if (args.trans == Trans::kC) T = T.conj();
  const at::Tensor R = args.left ? B3 : B3.mT();
  at::Tensor Xv = args.left ? X3 : X3.mT();

  // X rows [r0, r0 + sz) = a * inv(T_kk) @ Rk for the diagonal block starting at r0.
  // Direct leaves: the same solve restricted to the diagonal block, by the small-path kernel.
  auto leaf = [&](int64_t r0, int64_t sz, const at::Tensor& Rk, const c10::Scalar& a) {
    at::Tensor Xk = Xv.narrow(1, r0, sz);
    if (direct_leaves) {
      TrsmArgs la = args;
      la.alpha = a;
      TrsmShape ls;
      ls.k = sz;
      ls.batch = {bt};
      ls.m = args.left ? sz : Rk.size(2);
      ls.n = args.left ? Rk.size(2) : sz;
      ls.result = {bt, ls.m, ls.n};
      at::Tensor Xo = args.left ? Xk : Xk.mT();
      small_solve<S>(A3.narrow(1, r0, sz).narrow(2, r0, sz), args.left ? Rk : Rk.mT(), Xo, la, ls);
      return;
    }
    const StridedView Ik{inv, (r0 / nb) * tile, inv.size(0), sz, sz, inv.stride(0), nb, 1, false, false};
    gemm_into<S>(StridedView::of(Xk), a, Ik, StridedView::of(Rk), 0, blas);
  };

  if (plan.variant == BlockedVariant::kBlocked) {
    // Left-looking block rows: X_k = inv(T_kk) (alpha B_k - T_k,done X_done), in solve order.
    for (int64_t step = 0; step < nblk; ++step) {
      const int64_t kb = c.lower ? step : nblk - 1 - step;
      const int64_t r0 = kb * nb, sz = std::min(nb, k - r0);
      const at::Tensor Rk = R.narrow(1, r0, sz);
      if (step == 0) {
        leaf(r0, sz, Rk, args.alpha);
        continue;
      }
      const int64_t d0 = c.lower ? 0 : r0 + sz, dn = c.lower ? r0 : k - (r0 + sz);
      const at::Tensor tmp = gemm<S>(Rk, args.alpha, T.narrow(1, r0, sz).narrow(2, d0, dn), Xv.narrow(1, d0, dn), -1, blas);
      leaf(r0, sz, tmp, 1);
    }
    return;
  }

  // Recursive: solves rows [r0, r1) of T X = a R, R holding exactly those rows.
  std::function<void(int64_t, int64_t, const at::Tensor&, const c10::Scalar&)> solve =
      [&](int64_t r0, int64_t r1, const at::Tensor& Rr, const c10::Scalar& a) {
        const int64_t blocks = (r1 - r0 + nb - 1) / nb;
        if (blocks == 1) {
          leaf(r0, r1 - r0, Rr, a);
          return;
        }
        const int64_t mid = r0 + (blocks / 2) * nb, h = mid - r0, h2 = r1 - mid;
        if (c.lower) {
          solve(r0, mid, Rr.narrow(1, 0, h), a);
          const at::Tensor R2 = gemm<S>(Rr.narrow(1, h, h2), a, T.narrow(1, mid, h2).narrow(2, r0, h),
                                        Xv.narrow(1, r0, h), -1, blas);
          solve(mid, r1, R2, 1);
        } else {
          solve(mid, r1, Rr.narrow(1, h, h2), a);
          const at::Tensor R1 = gemm<S>(Rr.narrow(1, 0, h), a, T.narrow(1, r0, h).narrow(2, mid, h2),
                                        Xv.narrow(1, mid, h2), -1, blas);
          solve(r0, mid, R1, 1);
        }
      };
  solve(0, k, R, args.alpha);
}

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
  return solve_new(A, B, args, check_trsm(A, B, args, "hsma::trsm"));
}

void trsm_cuda_(const at::Tensor& A, at::Tensor& B, bool left, bool upper, c10::string_view trans,
                bool unitriangular, const c10::Scalar& alpha) {
  const TrsmArgs args = make_args(left, upper, trans, unitriangular, alpha);
  const TrsmShape s = check_trsm(A, B, args, "hsma::trsm_");
  check_inplace(A, B, s, "hsma::trsm_");
  if (s.k <= kSmallMaxM && !B.is_conj() && !B.is_neg()) {
    solve_into(A, B, B, args, s);  // the small kernel reads each element before writing it
  } else {
    B.copy_(solve_new(A, B, args, s));
  }
}

}  // namespace
}  // namespace hsma

TORCH_LIBRARY_IMPL(hsma, CUDA, m) {
  m.impl("trsm", &hsma::trsm_cuda);
  m.impl("trsm_", &hsma::trsm_cuda_);
}
