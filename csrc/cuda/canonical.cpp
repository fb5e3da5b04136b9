// The canonical problem (canonical.h): the canonical form, batch strides and their collapse, 3-D views.
#include "cuda/canonical.h"

#include <c10/cuda/CUDAStream.h>

#include <type_traits>
#include <vector>

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

Batched3 batched_3d(const at::Tensor& A, const at::Tensor& B, at::Tensor& X, const TrsmShape& s) {
  const int64_t k = s.k, bt = s.batch_numel();
  const auto a_batch = A.sizes().slice(0, A.dim() - 2);
  int64_t a_numel = 1;
  for (auto v : a_batch) a_numel *= v;
  std::vector<int64_t> a_shape = s.batch, b_shape = s.batch;
  a_shape.push_back(k); a_shape.push_back(k);
  b_shape.push_back(s.m); b_shape.push_back(s.n);
  return {a_numel == 1 ? A.reshape({1, k, k}) : A.expand(a_shape).reshape({bt, k, k}),
          B.expand(b_shape).reshape({bt, s.m, s.n}), X.view({bt, s.m, s.n})};
}

}  // namespace hsma
