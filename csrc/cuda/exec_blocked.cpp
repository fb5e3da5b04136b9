// The blocked executor (exec.h): the diagonal-block inversion, its GEMM doubling, the recursive or left-looking
// driver whose leaves are GEMMs with the inverted blocks (or small-kernel solves), then the repair.
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "cuda/canonical.h"
#include "cuda/exec.h"
#include "cuda/gemm.h"

namespace hsma {
namespace {

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

}  // namespace

template <typename S>
void exec_blocked(const at::Tensor& A, const at::Tensor& B, at::Tensor& X, const TrsmArgs& args, const TrsmShape& s,
                  const Plan& full_plan) {
  using K = typename kernel_type<S>::type;
  const BlockPlan& plan = full_plan.large;
  const int64_t k = s.k, bt = s.batch_numel();
  // 3-D views: A (btA, k, k) with btA = 1 when A is shared by the whole batch.
  Batched3 v = batched_3d(A, B, X, s);
  const at::Tensor A3 = v.A3, B3 = v.B3;
  at::Tensor X3 = v.X3;
  const Canonical c = canonicalise(args, A3.is_conj());

  const int64_t nb = plan.nb, ib = plan.ib;
  const int64_t nblk = (k + nb - 1) / nb;
  const bool direct_leaves = plan.direct_leaves();
  // Inverses of T's diagonal blocks: tile b of batch entry e at inv[e][b * tile], row pitch NB,
  // tiles NB * (NB + 1) apart. With that spacing the IB x IB diagonal tiles of all blocks, and
  // the block pairs combined at each doubling level below, are equally spaced along the
  // diagonal, so each level is one strided-batched GEMM over the whole matrix.
  const int64_t tile = nb * (nb + 1);
  BlasHandle blas;
  blas.aten = full_plan.aten_gemm;
  at::Tensor inv, inaccurate;  // inaccurate: the inversion's flags for the repair below
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
    inaccurate = at::empty({diag_inverse_tasks(p)}, A3.options().dtype(at::kInt));
    p.inaccurate = inaccurate.data_ptr<int>();
    check_launch(launch_diag_inverse<K>(p, c10::cuda::getCurrentCUDAStream()),
                 "launching the diagonal-block inverse kernel");
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
      exec_small<S>(A3.narrow(1, r0, sz).narrow(2, r0, sz), args.left ? Rk : Rk.mT(), Xo, la, ls, full_plan.small);
      return;
    }
    const StridedView Ik{inv, (r0 / nb) * tile, inv.size(0), sz, sz, inv.stride(0), nb, 1, false, false};
    gemm_into<S>(StridedView::of(Xk), a, Ik, StridedView::of(Rk), 0, blas);
  };

  // The right-hand sides as the solve updates them: one copy of R, then every update of a row block
  // (a R_k - T_k,done X_done) is one GEMM in place, with no copy or allocation per block. A single block
  // reads R itself.
  const at::Tensor Y = nblk == 1 ? R : at::empty(R.sizes(), R.options()).copy_(R);

  // Recursive: solves rows [r0, r1) of T X = a Yr, Yr holding exactly those rows (of Y, updated in place).
  std::function<void(int64_t, int64_t, const at::Tensor&, const c10::Scalar&)> solve_recursive =
      [&](int64_t r0, int64_t r1, const at::Tensor& Yr, const c10::Scalar& a) {
        const int64_t blocks = (r1 - r0 + nb - 1) / nb;
        if (blocks == 1) {
          leaf(r0, r1 - r0, Yr, a);
          return;
        }
        const int64_t mid = r0 + (blocks / 2) * nb, h = mid - r0, h2 = r1 - mid;
        // lower: top rows first, then bottom = a bottom - T[mid:r1, r0:mid] X[r0:mid]; upper: the mirror image
        const int64_t first = c.lower ? r0 : mid, n_first = c.lower ? h : h2;
        const int64_t second = c.lower ? mid : r0, n_second = c.lower ? h2 : h;
        solve_recursive(first, first + n_first, Yr.narrow(1, first - r0, n_first), a);
        const at::Tensor Y2 = Yr.narrow(1, second - r0, n_second);
        gemm_into<S>(StridedView::of(Y2), -1, StridedView::of(T.narrow(1, second, n_second).narrow(2, first, n_first)),
                     StridedView::of(Xv.narrow(1, first, n_first)), a, blas);
        solve_recursive(second, second + n_second, Y2, 1);
      };

  if (plan.variant == BlockedVariant::kBlocked) {
    // Left-looking block rows: X_k = inv(T_kk) (alpha Y_k - T_k,done X_done), in solve order.
    for (int64_t step = 0; step < nblk; ++step) {
      const int64_t kb = c.lower ? step : nblk - 1 - step;
      const int64_t r0 = kb * nb, sz = std::min(nb, k - r0);
      const at::Tensor Yk = Y.narrow(1, r0, sz);
      if (step == 0) {
        leaf(r0, sz, Yk, args.alpha);
        continue;
      }
      const int64_t d0 = c.lower ? 0 : r0 + sz, dn = c.lower ? r0 : k - (r0 + sz);
      gemm_into<S>(StridedView::of(Yk), -1, StridedView::of(T.narrow(1, r0, sz).narrow(2, d0, dn)),
                   StridedView::of(Xv.narrow(1, d0, dn)), args.alpha, blas);
      leaf(r0, sz, Yk, 1);
    }
  } else {
    solve_recursive(0, k, Y, args.alpha);
  }
  // Inverses with inf, nan or subnormal entries (pivots whose reciprocals overflow or underflow)
  // make the products above inexact: then one more launch solves again by substitution, where the
  // planner found that its launch fits the GPU (else its source says "no repair").
  if (inaccurate.defined() && plan.repair_cols > 0) exec_repair<S>(A3, B3, X3, args, inaccurate, plan.repair_cols);
}

#define HSMA_INSTANTIATE(S)                                                                                        \
  template void exec_blocked<S>(const at::Tensor&, const at::Tensor&, at::Tensor&, const TrsmArgs&, const TrsmShape&, \
                                const Plan&);
HSMA_FOR_EACH_DTYPE(HSMA_INSTANTIATE)
#undef HSMA_INSTANTIATE

}  // namespace hsma
