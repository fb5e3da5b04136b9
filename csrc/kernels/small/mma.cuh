// Tensor-core kernel (float64 and complex128 solves of many columns, sm_80+): a blocked
// right-looking substitution over 8-row blocks whose updates run on the FP64 tensor cores
// (mma.sync m8n8k4; on sm_90 two row blocks per m16n8k4 product, dmma_rows), so that an element
// of L read from shared memory serves 8 columns at once (the 8-lane segment kernel reads one
// element per column and multiply-add, and is bound by the L1 data pipe).
//   - A block of kWarps warps takes one (batch entry, column tile) task at a time (grid-stride
//     loop); each warp owns 8 columns of the tile and all M rows, held in the m8n8k4 accumulator
//     layout: lane l holds row 8 rb + l / 4, columns 2 (l % 4) + {0, 1} of row block rb.
//   - The whole block loads the triangle (load_packed_triangle) into shared memory in the A-operand
//     layout (MmaLayout), so that one operand load of a warp reads 32 consecutive elements.
//   - For each row block kb: the warp substitutes the block's 8 rows in registers (row r scaled by
//     its pivot's reciprocal, or divided, then shuffled to the lanes of the rows below, which
//     subtract L(q, r) x_r), stores them to X, rearranges them into B operands (shuffles) and
//     updates every row block below on the tensor cores, acc(rb) -= L(rb, kb) X(kb) (two k-steps
//     of 4). Complex128 splits each product into four real ones. Each x_i subtracts the blocks
//     L(i, kb) X(kb) in increasing kb, then L(i, k) x_k within its own block in increasing k.
//   - kFold (one A for every task: a single solve, A broadcast over the batch; or several column
//     tiles per matrix; the launcher then sizes the grid to the blocks that fit at once): the
//     block inverts A's diagonal blocks and replaces each block below by
//     W(rb, kb) = L(rb, kb) L(kb, kb)^-1 once (mma_fold_inverses),
//     and reuses them for all its later tasks, whose solve is then products only:
//     X(kb) = L(kb, kb)^-1 r(kb), acc(rb) -= W(rb, kb) r(kb) (mma_solve_blocks). Multiplying by
//     inverses is the blocked TRSM of the large path (the paper's, LAPACK-style inverted diagonal
//     blocks): not a substitution's rounding, within its error bound for these 8x8 blocks. Tasks
//     whose pivots need a true division, whose B holds inf or nan, or whose inverses or W would
//     not be finite substitute instead (with L staged again), so that IEEE special values spread
//     as in the other kernels. Folding is faster where one A serves the batch
//     (docs/experiments.md). With A batched the launcher folds where a matrix has several column
//     tiles, each block taking a contiguous range of tasks so that one fold serves all tiles of a
//     matrix; one fold per task is slower, so one tile per matrix keeps the substitution.
#pragma once
#include "common.cuh"

namespace hsma {
namespace {

template <int M>
struct MmaLayout {
  static_assert(M % 8 == 0, "MmaLayout: whole 8-row blocks");
  static constexpr int kBlocks = M / 8;
  // Block (rb, kb), kb <= rb, of 64 elements: its 8x4 halves s = 0, 1 (columns 4 s..4 s + 3), each
  // in lane order (row l / 4, column l % 4 of the half).
  __host__ __device__ static constexpr int block(int rb, int kb) { return (rb * (rb + 1) / 2 + kb) * 64; }
  __host__ __device__ static constexpr int at(int i, int k) {
    return block(i / 8, k / 8) + (k % 8) / 4 * 32 + (i % 8) * 4 + k % 4;
  }
  static constexpr int kSize = kBlocks * (kBlocks + 1) / 2 * 64;
};

// D += A B for one m8n8k4 FP64 product over a warp: A 8x4 (lane l: row l / 4, column l % 4), B 4x8
// (row l % 4, column l / 4), D 8x8 (row l / 4, columns 2 (l % 4) + {0, 1}: d0, d1). Every lane of
// the warp must call it.
__device__ __forceinline__ void dmma(double& d0, double& d1, double a, double b) {
#if !HSMA_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(HSMA_EMULATE_DMMA)
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
               : "+d"(d0), "+d"(d1)
               : "d"(a), "d"(b));
#else
  // Without FP64 mma.sync (a build for an older architecture; the launcher asks for sm_80+, but a
  // PTX build for one could be JIT-compiled there; HSMA_EMULATE_DMMA for testing this path): the
  // same product from shuffles. A(row, k) is
  // in lane 4 row + k, B(k, col) in lane 4 col + k.
  const int lane = static_cast<int>(threadIdx.x) % 32, row = lane / 4, col = 2 * (lane % 4);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const double ak = shfl(a, 4 * row + k, 32), b0 = shfl(b, 4 * col + k, 32), b1 = shfl(b, 4 * (col + 1) + k, 32);
    d0 = fma(ak, b0, d0);
    d1 = fma(ak, b1, d1);
  }
#endif
}

// D0 += A0 B and, with kPair, D1 += A1 B (two row blocks, one B), each as dmma. A pair is one
// m16n8k4 FP64 product where the GPU has it (sm_90+): its rows 0-7 are A0's and D0's, rows 8-15
// A1's and D1's, each in m8n8k4's lane layout, so it is the same two products. On the H200 m16n8k4
// runs at twice m8n8k4's rate, which is the FP64 vector rate (docs/experiments.md).
template <bool kPair>
__device__ __forceinline__ void dmma_rows(double& d00, double& d01, double& d10, double& d11, double a0, double a1,
                                          double b) {
  if constexpr (kPair) {
#if !HSMA_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(HSMA_EMULATE_DMMA)
    asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
        : "+d"(d00), "+d"(d01), "+d"(d10), "+d"(d11)
        : "d"(a0), "d"(a1), "d"(b));
#else
    dmma(d00, d01, a0, b);
    dmma(d10, d11, a1, b);
#endif
  } else {
    dmma(d00, d01, a0, b);
  }
}

// acc0 += a0 b and, with kPair, acc1 += a1 b on the tensor cores, a0, a1 and b one lane's operands
// (a: A, b: B). Complex products are four real ones.
template <bool kPair>
__device__ __forceinline__ void mma_add(double (&acc0)[2], double (&acc1)[2], double a0, double a1, double b) {
  dmma_rows<kPair>(acc0[0], acc0[1], acc1[0], acc1[1], a0, a1, b);
}
template <bool kPair>
__device__ __forceinline__ void mma_add(complex<double> (&acc0)[2], complex<double> (&acc1)[2], complex<double> a0,
                                        complex<double> a1, complex<double> b) {
  dmma_rows<kPair>(acc0[0].re, acc0[1].re, acc1[0].re, acc1[1].re, a0.re, a1.re, b.re);  // re += a.re b.re - a.im b.im
  dmma_rows<kPair>(acc0[0].re, acc0[1].re, acc1[0].re, acc1[1].re, a0.im, a1.im, -b.im);
  dmma_rows<kPair>(acc0[0].im, acc0[1].im, acc1[0].im, acc1[1].im, a0.re, a1.re, b.im);  // im += a.re b.im + a.im b.re
  dmma_rows<kPair>(acc0[0].im, acc0[1].im, acc1[0].im, acc1[1].im, a0.im, a1.im, b.re);
}
template <typename T> __device__ __forceinline__ void mma_add(T (&acc)[2], T a, T b) { mma_add<false>(acc, acc, a, a, b); }

__device__ __forceinline__ double negated(double v) { return -v; }
__device__ __forceinline__ complex<double> negated(complex<double> v) { return {-v.re, -v.im}; }
__device__ __forceinline__ bool is_finite(double v) { return isfinite(v); }
__device__ __forceinline__ bool is_finite(complex<double> v) { return isfinite(v.re) && isfinite(v.im); }

// Index in an 8x8 block of MmaLayout (A-operand order) of the element at row i, column k.
__host__ __device__ constexpr int mma_block_at(int i, int k) { return k / 4 * 32 + i * 4 + k % 4; }

// Blocks of kWarps warps per multiprocessor that the register allocator must fit.
// Eight warps: 2 (128 registers; complex128 at 64 rows spills some); four: 4, or 3 for complex128
// at 64 rows (a cap of 170 registers, 164-168 used; faster than 2 blocks, and 4 blocks spill:
// docs/experiments.md).
template <typename T, int M, int kWarps> constexpr int mma_min_blocks() {
  return kWarps == 8 ? 2 : sizeof(T) >= 16 && M == 64 ? 3 : 4;
}

// Substitution of one 8x8 diagonal block D (MmaLayout block; R its pivots' reciprocals) in a warp's
// registers: a[h] holds row q = lane / 4, column 2 (lane % 4) + h of the block's right-hand sides
// (the m8n8k4 accumulator layout), and is overwritten by the solution. Row r is scaled by its
// reciprocal (kExact: divided where the reciprocal would not do), shuffled to the lanes of the rows
// below, which subtract L(q, r) x_r, in increasing r.
template <typename T, bool kExact, bool kUnit>
__device__ __forceinline__ void mma_diagonal_block(T (&a)[2], const T* D, const T* R, int q, int c4) {
#pragma unroll
  for (int r = 0; r < 8; ++r) {
    T x[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      T v = a[h];
      if constexpr (kExact)
        v = divide_by_pivot(v, D[mma_block_at(r, r)], R[r]);
      else if constexpr (!kUnit)
        v = v * R[r];
      x[h] = shfl(v, 4 * r + c4, 32);
    }
    const T l = D[mma_block_at(q, r)];  // (read by the rows q > r only)
    if (q == r) {
      a[0] = x[0];
      a[1] = x[1];
    } else if (q > r) {
      a[0] = fms(a[0], l, x[0]);
      a[1] = fms(a[1], l, x[1]);
    }
  }
}

// The B operands (k-steps s = 0, 1) of an 8x8 block held in the accumulator layout: lane l takes
// row 4 s + l % 4, column l / 4, held by lane 4 (4 s + l % 4) + (l / 4) / 2.
template <typename T>
__device__ __forceinline__ void mma_b_operands(T (&b)[2], const T (&a)[2], int q, int c4) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int src = 4 * (4 * s + c4) + q / 2;
    const T v0 = shfl(a[0], src, 32), v1 = shfl(a[1], src, 32);
    b[s] = (q & 1) ? v1 : v0;
  }
}

// The solve of one warp's columns, held in acc (see small_solve_mma_kernel), row block by row
// block, each X(kb) stored to X as it is done:
//   - substituting (Ls and Ps = Rs: the staged triangle and its pivots' reciprocals): the diagonal
//     block solved in registers (mma_diagonal_block), then the blocks below updated on the tensor
//     cores, acc(rb) -= L(rb, kb) X(kb). The kernel's path for tasks whose pivots need a true
//     division or whose inputs are not all finite (kExact), where multiplying by inverses would not
//     give a substitution's results;
//   - kInverses (after mma_fold_inverses; Ls holds the W, Ps = Is the diagonal blocks' inverses):
//     with r = acc(kb) (its right-hand sides minus the earlier blocks' contributions) as B operands,
//     X(kb) = L(kb, kb)^-1 r and, for the blocks below, acc(rb) -= W(rb, kb) r, all on the tensor
//     cores.
// The blocks below are updated two at a time (dmma_rows), faster than one at a time. Pairing X(kb)
// with acc(kb + 1) too, or the fold's W (mma_fold_inverses, which then spills), is slower
// (docs/experiments.md).
template <typename T, int M, bool kInverses, bool kExact = false, bool kUnit = false>
__device__ __forceinline__ void mma_solve_blocks(T (&acc)[M / 8][2], const T* Ls, const T* Ps, int lane,
                                                 const SolveProblem<T>& p, T* X, int64_t jl) {
  using Layout = MmaLayout<M>;
  constexpr int kRB = M / 8;
  const int q = lane / 4, c4 = lane % 4, m = static_cast<int>(p.m);
  auto store = [&](const T(&x)[2], int kb) {
    const int row = 8 * kb + q;
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (row < m && jl + h < p.n) X[row * p.x.row + (jl + h) * p.x.col] = x[h];
  };
  // acc(rb) -= Ls(rb, kb) b for the row blocks rb > kb, two at a time (dmma_rows); innermost the row
  // blocks: independent products.
  auto update_below = [&](const T(&b)[2], int kb) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const T nb = negated(b[s]);
#pragma unroll
      for (int rb = kb + 1; rb < kRB; rb += 2) {
        const T* a = Ls + Layout::block(rb, kb) + s * 32 + lane;
        if (rb + 1 < kRB)
          mma_add<true>(acc[rb], acc[rb + 1], a[0], a[Layout::block(rb + 1, kb) - Layout::block(rb, kb)], nb);
        else
          mma_add(acc[rb], a[0], nb);
      }
    }
  };
#pragma unroll
  for (int kb = 0; kb < kRB; ++kb) {
    T b[2];
    if constexpr (kInverses) {
      mma_b_operands(b, acc[kb], q, c4);
      T x[2] = {T(0), T(0)};
#pragma unroll
      for (int s = 0; s < 2; ++s) mma_add(x, Ps[64 * kb + s * 32 + lane], b[s]);
      update_below(b, kb);
      store(x, kb);
    } else {
      mma_diagonal_block<T, kExact, kUnit>(acc[kb], Ls + Layout::block(kb, kb), Ps + 8 * kb, q, c4);
      store(acc[kb], kb);
      if (kb + 1 < kRB) {
        mma_b_operands(b, acc[kb], q, c4);
        update_below(b, kb);
      }
    }
  }
}

// Replaces a staged triangle by what the inverse-based solve multiplies with: each diagonal block
// L(d, d) by its inverse, into Is (MmaLayout blocks, d at 64 d), and each block below it,
// L(rb, kb), by W(rb, kb) = L(rb, kb) L(kb, kb)^-1, in place in Ls. The inverses are the
// substitution of the identity (mma_diagonal_block), W a product on the tensor cores; warp w of
// kWarps takes the blocks w, w + kWarps, ... Returns false when some entry of an inverse or a W is
// not finite (Ls then holds a mixture: the caller stages L again and substitutes). Barriers: every
// thread of the block calls it.
template <typename T, int M, int kWarps, bool kUnit>
__device__ bool mma_fold_inverses(T* Ls, T* Is, const T* Rs, int* bad, int w, int lane) {
  using Layout = MmaLayout<M>;
  constexpr int kRB = M / 8;
  constexpr int kPairs = kRB * (kRB - 1) / 2;
  const int q = lane / 4, c4 = lane % 4;
  bool ok = true;
#pragma unroll 1
  for (int d = w; d < kRB; d += kWarps) {
    T a[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) a[h] = T(q == 2 * c4 + h ? 1 : 0);
    mma_diagonal_block<T, false, kUnit>(a, Ls + Layout::block(d, d), Rs + 8 * d, q, c4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      ok = ok && is_finite(a[h]);
      Is[64 * d + mma_block_at(q, 2 * c4 + h)] = a[h];
    }
  }
  __syncthreads();  // the inverses are in Is
  int rb = 1, kb = w;  // the pairs (rb, kb < rb) in order of MmaLayout::block, from the w-th
  while (kb >= rb) kb -= rb++;
#pragma unroll 1
  for (int pi = w; pi < kPairs; pi += kWarps) {
    T* blk = Ls + Layout::block(rb, kb);
    T wk[2] = {T(0), T(0)};
#pragma unroll
    for (int s = 0; s < 2; ++s)  // B(k, n) = inverse(4 s + k, n): lane l takes k = l % 4, n = l / 4
      mma_add(wk, blk[s * 32 + lane], Is[64 * kb + mma_block_at(4 * s + c4, q)]);
    warp_sync();  // the warp has read its block of L
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      ok = ok && is_finite(wk[h]);
      blk[mma_block_at(q, 2 * c4 + h)] = wk[h];
    }
    for (kb += kWarps; kb >= rb; kb -= rb++) {
    }
  }
  if (!ok) *bad = 1;
  __syncthreads();  // the W are in Ls, and the flag set
  return *bad == 0;
}

template <typename T, int M, int kWarps, bool kFold>
__global__ void __launch_bounds__(kWarps * 32, (mma_min_blocks<T, M, kWarps>()))
small_solve_mma_kernel(SolveProblem<T> p, int64_t ntiles, bool contiguous) {
  using Layout = MmaLayout<M>;
  constexpr int kRB = M / 8;
  __shared__ T Ls[Layout::kSize];
  __shared__ T Is[kFold ? 64 * kRB : 1];
  __shared__ T Rs[M];
  __shared__ int exact, bad;
  const int tid = static_cast<int>(threadIdx.x);
  const int w = tid / 32, lane = tid % 32, q = lane / 4, c4 = lane % 4;
  const int m = static_cast<int>(p.m);
  const int64_t ntasks = p.batch * ntiles;
  grid_dependency_sync(p.dependent_launch == 1);
  int64_t held = -1;  // kFold: the offset of the A whose inverses and W are in Is and Ls
  // contiguous (kFold with A batched): block b takes a contiguous range of tasks, so that the
  // column tiles of one A follow each other in a block (task = batch entry * ntiles + tile); else
  // grid-stride (faster with one A for all tasks: docs/experiments.md).
  const bool chunked = kFold && contiguous;
  const int64_t chunk = chunked ? (ntasks + gridDim.x - 1) / gridDim.x : 1;
  const int64_t first = chunked ? blockIdx.x * chunk : blockIdx.x, step = chunked ? 1 : gridDim.x;
  const int64_t last = chunked && first + chunk < ntasks ? first + chunk : ntasks;

  for (int64_t task = first; task < last; task += step) {
    int64_t bidx, tile, off[3];
    task_coords(task, ntiles, bidx, tile);
    batch_offsets(p.bl, bidx, off);
    const int64_t jl = (tile * kWarps + w) * 8 + 2 * c4;  // my columns jl, jl + 1
    T acc[kRB][2];
    const T* B = p.B + off[1];
#pragma unroll
    for (int rb = 0; rb < kRB; ++rb)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = 8 * rb + q;
        acc[rb][h] = (row < m && jl + h < p.n) ? B[row * p.b.row + (jl + h) * p.b.col] : T(0);  // alpha: below
      }
    __syncthreads();  // the previous task is done with Ls, Is and the flags
    if (tid == 0) exact = bad = 0;
    __syncthreads();  // the flags are cleared
    const bool reuse = kFold && off[0] == held;  // (block-uniform)
    if (!reuse)
      load_packed_triangle<T, M, kWarps * 32, Layout>(Ls, Rs, &exact, p.L + off[0], p, tid, [] { __syncthreads(); });
    bool finite_b = true;
#pragma unroll
    for (int rb = 0; rb < kRB; ++rb)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        acc[rb][h] = p.alpha * acc[rb][h];
        if constexpr (kFold) finite_b = finite_b && is_finite(acc[rb][h]);
      }
    if (!finite_b) exact = 1;  // inf / nan spread as a substitution spreads them
    __syncthreads();
    T* X = p.X + off[2];
    if constexpr (kFold) {
      if (exact == 0 && (reuse || (p.unit ? mma_fold_inverses<T, M, kWarps, true>(Ls, Is, Rs, &bad, w, lane)
                                          : mma_fold_inverses<T, M, kWarps, false>(Ls, Is, Rs, &bad, w, lane)))) {
        held = off[0];
        mma_solve_blocks<T, M, true>(acc, Ls, Is, lane, p, X, jl);
        continue;
      }
      if (reuse || bad) {  // Ls holds W (rare: B not finite, or an inverse or W overflowed): L again
        __syncthreads();   // every thread has read the flags
        load_packed_triangle<T, M, kWarps * 32, Layout>(Ls, Rs, &exact, p.L + off[0], p, tid,
                                                        [] { __syncthreads(); });
        __syncthreads();
      }
      held = -1;
      mma_solve_blocks<T, M, false, true, false>(acc, Ls, Rs, lane, p, X, jl);  // (unit: pivots and reciprocals 1)
    } else {
      if (exact)
        mma_solve_blocks<T, M, false, true, false>(acc, Ls, Rs, lane, p, X, jl);  // (never with a unit diagonal)
      else if (p.unit)
        mma_solve_blocks<T, M, false, false, true>(acc, Ls, Rs, lane, p, X, jl);
      else
        mma_solve_blocks<T, M, false, false, false>(acc, Ls, Rs, lane, p, X, jl);
    }
  }
}

// The tensor-core kernel of M rows with the plan's warps per block (8 columns each) and variant
// (select.h: mma_plan). The folding kernel runs on a grid of the blocks that fit at once, so that
// each block inverts and folds an A once for all its tasks of that A.
template <typename T, int M>
hsmaError_t launch_mma(const SolveProblem<T>& p, const SmallPlan& plan, const DeviceInfo& dev, hsmaStream_t stream) {
  constexpr int kWide = 8, kNarrow = 4;
  const bool a_shared = shares_a(p);
  const int warps = plan.warps;
  const int64_t tile_cols = warps * 8;
  const int64_t ntiles = (p.n + tile_cols - 1) / tile_cols;
  const int64_t ntasks = p.batch * ntiles;
  const bool fold = plan.fold;
  auto run = [&](auto kernel, int threads) {
    int64_t grid = ntasks;
    if (fold) {
      int per_sm = 0;
      if (hsmaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0) != hsmaSuccess || per_sm < 1)
        per_sm = 1;
      grid = std::min<int64_t>(ntasks, int64_t(per_sm) * dev.multiprocessors);
    }
    return launch_small(kernel, small_grid(p, grid), threads, 0, stream, p,
                        dev, !fold, ntiles, fold && !a_shared);
  };
  if (fold)
    return warps == kNarrow ? run(small_solve_mma_kernel<T, M, kNarrow, true>, kNarrow * 32)
                            : run(small_solve_mma_kernel<T, M, kWide, true>, kWide * 32);
  return warps == kNarrow ? run(small_solve_mma_kernel<T, M, kNarrow, false>, kNarrow * 32)
                          : run(small_solve_mma_kernel<T, M, kWide, false>, kWide * 32);
}

// The tensor-core kernel the plan names: 32 or 64 rows (float64 and complex128; not built for AMD).
template <typename T>
hsmaError_t run_mma(const SolveProblem<T>& p, const SmallPlan& plan, const DeviceInfo& dev, hsmaStream_t stream) {
  constexpr SmallDtype kDtype = small_dtype<T>();
  if constexpr (!HSMA_HIP && (kDtype == SmallDtype::kFloat64 || kDtype == SmallDtype::kComplex128)) {
    if (plan.rows == 32) return launch_mma<T, 32>(p, plan, dev, stream);
    return launch_mma<T, 64>(p, plan, dev, stream);
  } else {
    (void)p, (void)plan, (void)dev, (void)stream;
    return hsmaError_t(1);  // (not a plan of select.h)
  }
}

}  // namespace
}  // namespace hsma
