// The small executor (exec.h): orders up to 64, one launch of the small kernels (kernels/small_solve.cuh) for the
// whole batch, reading A and B in place through their strides (a broadcast A is never copied). exec_small<float>
// also takes bfloat16 and float16 A, B and X, which the kernels read and write as they are stored.
#include <c10/cuda/CUDAStream.h>

#include <vector>

#include "cuda/canonical.h"
#include "cuda/exec.h"

namespace hsma {

namespace {

// Fills the kernels' problem for the storage types SA (A's) and SB (B's and X's), K the arithmetic type, and
// launches it.
template <typename K, typename SA, typename SB>
void launch_small_as(const at::Tensor& A, const at::Tensor& B, at::Tensor& X, const TrsmArgs& args,
                     const TrsmShape& s, const SmallKnobs& knobs, const BatchLayout& bl) {
  SolveProblem<K, SA, SB> p;
  p.bl = bl;
  const Canonical c = canonicalise(args, A.is_conj());
  const int64_t ar = A.stride(-2), ac = A.stride(-1);
  p.m = s.k;
  p.n = args.left ? s.n : s.m;
  p.batch = s.batch_numel();
  p.L = reinterpret_cast<const SA*>(A.const_data_ptr());
  p.l = c.transposed ? MatrixRef{ac, ar} : MatrixRef{ar, ac};
  p.B = reinterpret_cast<const SB*>(B.const_data_ptr());
  p.b = args.left ? MatrixRef{B.stride(-2), B.stride(-1)} : MatrixRef{B.stride(-1), B.stride(-2)};
  p.X = reinterpret_cast<SB*>(X.data_ptr());
  p.x = args.left ? MatrixRef{X.stride(-2), X.stride(-1)} : MatrixRef{X.stride(-1), X.stride(-2)};
  p.conj = c.conj;
  p.unit = args.unit;
  p.alpha = to_kernel_scalar<K>(args.alpha);
  copy_small_knobs(p, knobs);  // (the defaults: the launcher's choices)
  if (!c.lower) read_backwards(p.m, p.L, p.l, p.B, p.b, p.X, p.x);
  check_launch(launch_small_solve(p, c10::cuda::getCurrentCUDAStream()), "launching the small-solve kernel");
}

// The 16-bit storage types of float32 arithmetic: f(SB()) for B's dtype, with A in B's dtype or in float32.
template <typename F> void with_half_storage(at::ScalarType b, F f) {
  if (b == at::kBFloat16)
    f(bfloat16_bits());
  else
    f(float16_bits());
}

}  // namespace

template <typename S>
void exec_small(const at::Tensor& A, const at::Tensor& B, at::Tensor& X, const TrsmArgs& args, const TrsmShape& s,
                const SmallKnobs& knobs) {
  using K = typename kernel_type<S>::type;
  BatchLayout bl;
  at::Tensor Ae = A, Be = B;  // read in place through broadcast strides
  const std::vector<int64_t> strides[3] = {batch_strides(A, s.batch), batch_strides(B, s.batch),
                                           batch_strides(X, s.batch)};
  if (!collapse_batch(s.batch, strides, bl)) {
    // More than kMaxBatchDims non-mergeable batch dims: solve batch-contiguous copies (a
    // contiguous copy of a conj view holds the conjugated values, without the conj bit).
    std::vector<int64_t> a_shape = s.batch, b_shape = s.batch;
    a_shape.push_back(s.k); a_shape.push_back(s.k);
    b_shape.push_back(s.m); b_shape.push_back(s.n);
    Ae = A.expand(a_shape).contiguous();
    Be = B.expand(b_shape).contiguous();
    if (!X.is_contiguous()) {  // the in-place form into a strided B: solve into a temporary
      at::Tensor Xc = at::empty(s.result, X.options());
      exec_small<S>(Ae, Be, Xc, args, s, knobs);
      X.copy_(Xc);
      return;
    }
    const std::vector<int64_t> cstrides[3] = {batch_strides(Ae, s.batch), batch_strides(Be, s.batch),
                                              batch_strides(X, s.batch)};
    HSMA_CHECK(collapse_batch(s.batch, cstrides, bl), "hsma::trsm: internal error: batch layout");
  }
  if constexpr (std::is_same_v<K, float>) {
    if (half_dtype(Be.scalar_type())) {  // 16-bit B and X; A in their dtype or in float32
      with_half_storage(Be.scalar_type(), [&](auto sb) {
        using SB = decltype(sb);
        if (Ae.scalar_type() == at::kFloat)
          launch_small_as<float, float, SB>(Ae, Be, X, args, s, knobs, bl);
        else
          launch_small_as<float, SB, SB>(Ae, Be, X, args, s, knobs, bl);
      });
      return;
    }
  }
  launch_small_as<K, K, K>(Ae, Be, X, args, s, knobs, bl);
}

#define HSMA_INSTANTIATE(S)                                                                                 \
  template void exec_small<S>(const at::Tensor&, const at::Tensor&, at::Tensor&, const TrsmArgs&, const TrsmShape&, \
                              const SmallKnobs&);
HSMA_FOR_EACH_DTYPE(HSMA_INSTANTIATE)
#undef HSMA_INSTANTIATE

}  // namespace hsma
