// The canonical problem (canonical.h): the canonical form, batch strides and their collapse, and
// the small path's SolveProblem.
#include "cuda/canonical.h"

#include <c10/cuda/CUDAStream.h>

#include <type_traits>
#include <vector>

#include "overrides.h"

namespace hsma {

void check_launch(hsmaError_t err, const char* what) {
  HSMA_CHECK(err == hsmaSuccess, "hsma::trsm: ", what, " failed: ", hsmaGetErrorString(err));
}

Canonical canonicalise(const TrsmArgs& args, bool a_is_conj) {
  Canonical c;
  c.transposed = (args.trans != Trans::kN) == args.left;
  c.conj = (args.trans == Trans::kC) != a_is_conj;
  c.lower = (!args.upper) != c.transposed;
  return c;
}

std::vector<int64_t> batch_strides(const at::Tensor& t, const std::vector<int64_t>& batch) {
  std::vector<int64_t> st(batch.size(), 0);
  const int64_t tb = t.dim() - 2, off = static_cast<int64_t>(batch.size()) - tb;
  for (int64_t d = 0; d < tb; ++d)
    if (t.size(d) != 1) st[off + d] = t.stride(d);
  return st;
}

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

namespace {

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

}  // namespace

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
  if (!c.lower) read_backwards(p.m, p.L, p.l, p.B, p.b, p.X, p.x);
  check_launch(launch_small_solve<K>(p, c10::cuda::getCurrentCUDAStream()), "launching the small-solve kernel");
}

#define HSMA_INSTANTIATE(S) \
  template void small_solve<S>(const at::Tensor&, const at::Tensor&, at::Tensor&, const TrsmArgs&, const TrsmShape&);
HSMA_FOR_EACH_DTYPE(HSMA_INSTANTIATE)
#undef HSMA_INSTANTIATE

}  // namespace hsma
