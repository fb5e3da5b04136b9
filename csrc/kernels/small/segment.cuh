// Segment kernel, for a few columns of a triangle beyond 16 rows (a single solve) and for complex
// batches beyond 48 rows (complex64) or 32 rows (complex128) (8-lane segments; beyond 48 rows
// complex128 takes the tensor-core kernel instead on sm_80+, and large batches take the tile kernel
// or the tensor-core kernel, as launch_small_solve says):
//   - a thread block takes one (batch entry, column tile) task at a time (grid-stride loop, so
//     any batch size and any n fit in a 1-D grid);
//   - L's lower triangle is stored column by column in shared memory (SegmentLayout), padded to
//     the identity up to a compile-time M in {32, 64} (also 48 for 8-lane segments), so that lanes
//     reading one column's rows hit consecutive words; a 64x64 complex128 triangle needs 33-34 KB;
//   - a "warp-wide" segment (the launcher's 32 lanes: single solves and other few-column cases)
//     owns one column of B: on CUDA M / 2 lanes, lane l holding the rows 2l and 2l + 1 in registers
//     (blocked rows), with the reciprocals of those rows' pivots; strided on request or on AMD
//     (32 lanes, lane l holding row l and, at M = 64, row l + 32);
//   - column-oriented forward substitution, unrolled over M (blocked rows at M = 64: a loop of
//     four steps per iteration): at each step the lane holding the next rows (blocked: two) solves
//     them, shuffles broadcast them, and every lane updates its rows below. No __syncthreads and no
//     shared-memory access on the dependent chain.
// Also here: the warp-task variant (one matrix per warp, for large batches of a few columns each).
#pragma once
#include "common.cuh"

namespace hsma {
namespace {

// Row of a column that lane `lane` of a kSeg-lane segment holds in its slot s: strided
// (lane + kSeg s) or blocked (kRows lane + s, kRows = M / kSeg).
template <int M, int kSeg, bool kBlocked> __device__ __forceinline__ int segment_row(int lane, int s) {
  return kBlocked ? lane * (M / kSeg) + s : lane + s * kSeg;
}

// Segment substitution of kCols columns over kSeg lanes: lane l owns rows l + kSeg * s
// (s < M / kSeg) of each column in b[c]. At step k the lane owning row k scales it by the pivot's
// reciprocal, a shuffle among the segment's lanes broadcasts x_k, and every lane updates its rows
// below k with L(:, k) from the packed triangle (each L(i, k) read once for the kCols columns).
// With one or two rows per lane (kSeg = 32: strided few-column solves) the reciprocals sit in
// registers, so no memory access is on the dependent chain; with more rows per lane (narrow
// segments, for batches) each step reads Rs[k], an address known in advance.
template <typename T, int M, int kSeg, bool kExact, int kCols>
__device__ __forceinline__ void substitute_segment(T (&b)[kCols][M / kSeg], const T* Ls, const T* Rs, int lane,
                                                   bool unit) {
  constexpr int kRows = M / kSeg;
  static_assert(M % kSeg == 0, "substitute_segment: whole rows per lane");
  constexpr bool kRegisterReciprocals = kRows <= 2;
  T r[kRegisterReciprocals ? kRows : 1];
  if constexpr (kRegisterReciprocals) {
#pragma unroll
    for (int s = 0; s < kRows; ++s) r[s] = Rs[lane + s * kSeg];
  }
  // (Row block s, then the lane src of the segment holding its row: k = kSeg s + src. Written as
  // one loop over k, nvcc emits different and slower code for the 8-lane segments.)
#pragma unroll
  for (int s = 0; s < kRows; ++s) {
#pragma unroll
    for (int src = 0; src < kSeg; ++src) {
      const int k = s * kSeg + src;
      T rk = T(1);
      if (!unit) {
        if constexpr (kRegisterReciprocals) rk = r[s];
        else rk = Rs[k];
      }
      T xk[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        T v = b[c][s];
        if (!unit) {
          if constexpr (kExact)
            v = divide_by_pivot(v, Ls[packed_start<M>(k)], rk);
          else
            v = v * rk;
        }
        xk[c] = v;
        if constexpr (kSeg > 1) xk[c] = shfl(v, src, kSeg);
        if (lane == src) b[c][s] = xk[c];
      }
      const T* col = Ls + packed_start<M>(k) - k;  // col[i] = L(i, k) for i >= k
#pragma unroll
      for (int t = s; t < kRows; ++t) {
        const int i = lane + t * kSeg;
        if (i > k) {
          const T l = col[i];
#pragma unroll
          for (int c = 0; c < kCols; ++c) b[c][t] = fms(b[c][t], l, xk[c]);
        }
      }
    }
  }
}

// Blocked segment substitution of one column over kSeg lanes: lane p owns the contiguous rows
// kRows p + s (s < kRows = M / kSeg) in b, L is in SegmentLayout<M, kRows>. One block of rows (one
// lane's) per step q: every lane substitutes its own rows against L's diagonal block q (one
// instruction stream; only lane q's result is used, and kept), kRows shuffles broadcast lane q's
// solved rows, and every lane updates its rows with the block L(rows of the lane, rows of q). The
// update is meaningful for the lanes p > q only; the others are done (lane q) or have been
// (p < q), and update their dead rows with whatever they read, so that the update needs no
// branch and its loads are issued ahead of the shuffles. Each row subtracts L(i, k) x_k in
// increasing k, and x_i is the same product by the pivot's reciprocal (or division), as in
// substitute_segment: the same operations in the same order, with one shuffle latency per kRows
// rows on the dependent chain instead of one per row (a single solve is that chain). Real types
// give bitwise the results of substitute_segment (H200); complex ones can differ in the last bit
// at M = 32, where the compiler fuses the complex products' multiply-adds differently.
// kSteps steps per iteration of a rolled loop (kSteps = kSeg: fully unrolled). Fully unrolled at
// 64 rows, a single solve (one warp per scheduler, each instruction run once) waits mostly for
// its instructions to be fetched (Nsight Compute's "no instruction" stall); rolled, the code stays
// in the instruction cache, at the cost of run-time addresses and of loads no longer hoisted
// across iterations (see kBlockedSteps64). Loading the pivots from L with B (no finish_pivots),
// and staging the triangle in groups of columns for the substitution to start on, are slower
// (docs/experiments.md).
template <typename T, int M, int kSeg, bool kExact, bool kUnit, int kSteps = kSeg>
__device__ __forceinline__ void substitute_segment_blocked(T (&b)[M / kSeg], const T* Ls, const T* Rs, int lane) {
  constexpr int kRows = M / kSeg;
  static_assert(kSeg % kSteps == 0, "substitute_segment_blocked: whole loop iterations");
  using Layout = SegmentLayout<M, kRows>;
  T r[kRows];     // the reciprocals of my rows' pivots
  T done[kRows];  // my rows, solved at my step
#pragma unroll
  for (int s = 0; s < kRows; ++s) r[s] = kUnit ? T(1) : Rs[lane * kRows + s];
  auto step = [&](int q) {
    // Lq[block_at(q, s, t)] = L(kRows lane + s, kRows q + t) (lanes up to q: lane q's slots).
    const T* Lq = Ls + (lane > q ? lane - q : 0);
    T x[kRows];
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
      T v = b[s];
#pragma unroll
      for (int t = 0; t < s; ++t) v = fms(v, Ls[Layout::block_at(q, s, t)], x[t]);
      if constexpr (kExact)
        v = divide_by_pivot(v, Ls[Layout::block_at(q, s, s)], Rs[q * kRows + s]);  // (block q's pivots: uniform)
      else if constexpr (!kUnit)
        v = v * r[s];
      x[s] = v;
    }
    if (lane == q) {
#pragma unroll
      for (int s = 0; s < kRows; ++s) done[s] = x[s];
    }
    T xq[kRows];
#pragma unroll
    for (int t = 0; t < kRows; ++t) xq[t] = shfl(x[t], q, kSeg);
#pragma unroll
    for (int t = 0; t < kRows; ++t)
#pragma unroll
      for (int s = 0; s < kRows; ++s) b[s] = fms(b[s], Lq[Layout::block_at(q, s, t)], xq[t]);
  };
  if constexpr (kSteps == kSeg) {
#pragma unroll
    for (int q = 0; q < kSeg; ++q) step(q);
  } else {
#pragma unroll 1
    for (int q0 = 0; q0 < kSeg; q0 += kSteps) {
#pragma unroll
      for (int u = 0; u < kSteps; ++u) step(q0 + u);
    }
  }
#pragma unroll
  for (int s = 0; s < kRows; ++s) b[s] = done[s];
}

// kCols columns of a segment: substitutes b (the lane's rows of columns j + c * j_step, loaded;
// kBlocked: the blocked substitution, one column) and writes the solved rows to X, for the columns
// before j_end.
template <typename T, int M, int kSeg, bool kBlocked, int kSteps = kSeg, int kCols, typename SA, typename SB>
__device__ __forceinline__ void solve_and_store_columns(T (&b)[kCols][M / kSeg], const T* Ls, const T* Rs, int lane,
                                                        bool exact, const SolveProblem<T, SA, SB>& p, SB* X,
                                                        int64_t j, int64_t j_step, int64_t j_end) {
  if constexpr (kBlocked) {
    static_assert(kCols == 1, "solve_and_store_columns: one column per blocked segment");
    if (exact)
      substitute_segment_blocked<T, M, kSeg, true, false, kSteps>(b[0], Ls, Rs, lane);  // (never with a unit diagonal)
    else if (p.unit)
      substitute_segment_blocked<T, M, kSeg, false, true, kSteps>(b[0], Ls, Rs, lane);
    else
      substitute_segment_blocked<T, M, kSeg, false, false, kSteps>(b[0], Ls, Rs, lane);
  } else {
    if (exact)
      substitute_segment<T, M, kSeg, true>(b, Ls, Rs, lane, p.unit);
    else
      substitute_segment<T, M, kSeg, false>(b, Ls, Rs, lane, p.unit);
  }
  const int m = static_cast<int>(p.m);
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const int64_t jc = j + c * j_step;
#pragma unroll
    for (int s = 0; s < M / kSeg; ++s) {
      const int row = segment_row<M, kSeg, kBlocked>(lane, s);
      if (jc < j_end && row < m) X[row * p.x.row + jc * p.x.col] = from_compute<SB>(b[c][s]);
    }
  }
}

// Blocks of the segment kernel that the register allocator must fit on one multiprocessor. For
// 8-lane segments (batches: occupancy matters) 4 of 256 threads (64 registers) for 8-byte types
// and 3 (80 registers, a few spilled) for complex128 (4 spill more and are slower). Left to ptxas,
// complex64 takes 82 registers, so only 2 blocks fit (registers are allocated 8 per thread at a
// time), which is slower (docs/experiments.md).
// Two columns per segment: 2 blocks (128 registers; complex128 at 48 rows spills 68 bytes).
template <typename T, int kSeg, int kCols = 1> __host__ __device__ constexpr int segment_min_blocks() {
  return kSeg != 8 ? 1 : kCols > 1 ? 2 : sizeof(T) >= 16 ? 3 : 4;
}

// Segment kernel: a thread block of kThreads takes one (batch entry, column tile) task at a time;
// the whole block loads the triangle into shared memory (by columns, SegmentLayout), then each
// kSeg-lane segment solves columns of the tile (kThreads / kSeg * kCols columns per pass). Strided
// segments (kBlocked false): kSeg = 32 spreads a column over a warp, one row per step; narrower
// segments keep M / kSeg rows per lane in registers for batches whose columns would not fit one
// thread's registers (the column kernel's limit) at a fraction of the warp-wide segment's
// instructions per step. Blocked segments (kBlocked: the warp-wide segments' default on CUDA,
// single solves, where the chain of dependent steps is the time) solve a lane's M / kSeg
// contiguous rows per step (substitute_segment_blocked).
// kCols columns per strided segment (columns j, j + kThreads / kSeg, ...): each L(i, k) read from
// shared memory (the L1 data pipe bounds the 8-lane segments) then serves kCols multiply-adds. Two
// columns at 2 blocks of 256 threads per multiprocessor (128 columns in flight, as one column at 4
// blocks; 96 at 3) are faster for complex128 at 48 rows and slower for complex64 at 64 rows, where
// the launcher keeps one (launch_narrow_segments; docs/experiments.md).
// The first pass's right-hand sides are loaded before the triangle, so both loads are in flight.
template <typename T, int M, int kSeg, bool kBlocked = false, int kThreads = kSmallThreads, int kSteps = kSeg,
          int kCols = 1, typename SA = T, typename SB = SA>
__global__ void __launch_bounds__(kThreads, (segment_min_blocks<T, kSeg, kCols>()))
small_solve_segments_kernel(SolveProblem<T, SA, SB> p, int64_t tile_cols, int64_t ntiles) {
  constexpr int kRows = M / kSeg;
  static_assert(M % kSeg == 0, "small_solve_segments_kernel: whole rows per lane");
  static_assert((kSeg & (kSeg - 1)) == 0, "small_solve_segments_kernel: a power-of-two segment (shuffle width)");
  using Layout = SegmentLayout<M, kBlocked ? kRows : 1>;
  __shared__ T Ls[Layout::kSize];
  __shared__ T Rs[M];
  __shared__ int exact;
  const int m = static_cast<int>(p.m);
  const int tid = static_cast<int>(threadIdx.x);
  const int nseg = kThreads / kSeg;
  const int seg = tid / kSeg, lane = tid % kSeg;
  const int64_t ntasks = p.batch * ntiles;
  grid_dependency_sync(p.dependent_launch == 1);

  for (int64_t task = blockIdx.x; task < ntasks; task += gridDim.x) {
    int64_t bidx, tile, off[3];
    task_coords(task, ntiles, bidx, tile);
    batch_offsets(p.bl, bidx, off);
    const SB* B = p.B + off[1];
    SB* X = p.X + off[2];
    const int64_t j_begin = tile * tile_cols;
    const int64_t j_end = j_begin + tile_cols < p.n ? j_begin + tile_cols : p.n;
    T b[kCols][kRows];
    auto load_rhs = [&](int64_t j) {  // columns j + c nseg
#pragma unroll
      for (int c = 0; c < kCols; ++c)
#pragma unroll
        for (int s = 0; s < kRows; ++s) {
          const int row = segment_row<M, kSeg, kBlocked>(lane, s);
          const int64_t jc = j + c * nseg;
          b[c][s] = (jc < j_end && row < m) ? to_compute<T>(B[row * p.b.row + jc * p.b.col]) : T(0);  // alpha: later
        }
    };
    load_rhs(j_begin + seg);

    __syncthreads();  // the previous task is done with Ls
    if (tid == 0) exact = 0;
    __syncthreads();  // exact is cleared
    // (the staging unrolled where the registers are not capped: warp-wide segments)
    constexpr int kStageUnroll = segment_min_blocks<T, kSeg, kCols>() == 1 ? 16 : 1;
    load_packed_triangle<T, M, kThreads, Layout, kStageUnroll>(Ls, Rs, &exact, p.L + off[0], p, tid,
                                                               [] { __syncthreads(); });
    __syncthreads();
    const bool exact_task = exact != 0;

    for (int64_t j0 = j_begin; j0 < j_end; j0 += nseg * kCols) {
      const int64_t j = j0 + seg;
      if (j0 != j_begin) load_rhs(j);
#pragma unroll
      for (int c = 0; c < kCols; ++c)
#pragma unroll
        for (int s = 0; s < kRows; ++s) b[c][s] = p.alpha * b[c][s];
      solve_and_store_columns<T, M, kSeg, kBlocked, kSteps>(b, Ls, Rs, lane, exact_task, p, X, j, nseg, j_end);
    }
  }
}

// Warp-task variant of the segment kernel, for large batches of a few columns each (a batch of
// vectors: Kalman filters, per-sample solves): each 32-lane warp takes a whole matrix (task = batch
// entry) with its own packed triangle in shared memory and solves its few columns one after the
// other, synchronising only within the warp, so the block's warps never wait for each other and
// no lane idles while one column is solved. Blocks of kWarpTaskThreads; select.h's warp_tasks_fit
// says where the four triangles fit in shared memory.
template <typename T, int M, typename SA, typename SB>
__global__ void __launch_bounds__(kWarpTaskThreads)
small_solve_warp_tasks_kernel(SolveProblem<T, SA, SB> p) {
  constexpr int kRows = M / kSegment;
  constexpr int kWarps = kWarpTaskThreads / kSegment;
  constexpr int kPacked = M * (M + 1) / 2;
  __shared__ T Ls_all[kWarps][kPacked];
  __shared__ T Rs_all[kWarps][M];
  __shared__ int exact_all[kWarps];
  const int w = static_cast<int>(threadIdx.x) / kSegment, lane = static_cast<int>(threadIdx.x) % kSegment;
  T* Ls = Ls_all[w];
  T* Rs = Rs_all[w];
  const int m = static_cast<int>(p.m);
  grid_dependency_sync(p.dependent_launch == 1);

  for (int64_t task = int64_t(blockIdx.x) * kWarps + w; task < p.batch; task += int64_t(gridDim.x) * kWarps) {
    int64_t off[3];
    batch_offsets(p.bl, task, off);
    const SB* B = p.B + off[1];
    SB* X = p.X + off[2];
    warp_sync();  // this warp's previous task is done with its triangle
    if (lane == 0) exact_all[w] = 0;
    warp_sync();
    load_packed_triangle<T, M, kSegment>(Ls, Rs, &exact_all[w], p.L + off[0], p, lane, [] { warp_sync(); });
    warp_sync();
    const bool exact_task = exact_all[w] != 0;
    for (int64_t j = 0; j < p.n; ++j) {
      T b[1][kRows];
#pragma unroll
      for (int s = 0; s < kRows; ++s) {
        const int row = lane + s * kSegment;
        b[0][s] = row < m ? p.alpha * to_compute<T>(B[row * p.b.row + j * p.b.col]) : T(0);
      }
      solve_and_store_columns<T, M, kSegment, false>(b, Ls, Rs, lane, exact_task, p, X, j, 1, p.n);
    }
  }
}

template <typename T, int M, typename SA, typename SB>
hsmaError_t launch_warp_tasks(const SolveProblem<T, SA, SB>& p, const DeviceInfo& dev, hsmaStream_t stream) {
  constexpr int kWarps = kWarpTaskThreads / kSegment;
  const int64_t blocks = (p.batch + kWarps - 1) / kWarps;
  const unsigned grid = small_grid(p, blocks);
  return launch_small(small_solve_warp_tasks_kernel<T, M, SA, SB>, grid, kWarpTaskThreads, 0, stream, p, dev, true);
}

template <typename T, int M, int kSeg, bool kBlocked = false, int kThreads = kSmallThreads, int kSteps = kSeg,
          int kCols = 1, typename SA, typename SB>
hsmaError_t launch_segments(const SolveProblem<T, SA, SB>& p, const DeviceInfo& dev, hsmaStream_t stream) {
  const int pass_cols = kThreads / kSeg * kCols;  // columns per pass of all segments
  // Columns per task: one pass of all segments; more passes only while the grid stays full.
  const int64_t sms = dev.multiprocessors;
  int64_t passes = 1;
  const int64_t n_pass = (p.n + pass_cols - 1) / pass_cols;
  while (passes < 8 && passes < n_pass && p.batch * ((n_pass + 2 * passes - 1) / (2 * passes)) >= 4 * sms)
    passes *= 2;
  const int64_t tile_cols = pass_cols * passes;
  const int64_t ntiles = (p.n + tile_cols - 1) / tile_cols;
  const int64_t ntasks = p.batch * ntiles;
  const unsigned grid = small_grid(p, ntasks);
  return launch_small(small_solve_segments_kernel<T, M, kSeg, kBlocked, kThreads, kSteps, kCols, SA, SB>, grid,
                      kThreads, 0, stream, p, dev, true, tile_cols, ntiles);
}

// 8-lane segments are built on CUDA only (select.h: small_narrow_segments says why).
#if HSMA_HIP
constexpr bool kNarrowSegments = false;
#else
constexpr bool kNarrowSegments = true;
#endif

// 8-lane segments: two columns per segment for complex128 at 33-48 rows, one elsewhere (select.h:
// segment_columns; small_solve_segments_kernel says why).
template <typename T, int M, typename SA, typename SB>
hsmaError_t launch_narrow_segments(const SolveProblem<T, SA, SB>& p, const DeviceInfo& dev, hsmaStream_t stream) {
  constexpr int kCols = segment_columns(small_dtype<T>(), M);
  return launch_segments<T, M, kNarrowSegment, false, kSmallThreads, kNarrowSegment, kCols>(p, dev, stream);
}

// The segment kernel of M rows the plan names: 8-lane segments, blocked warp-wide segments (M / 2
// lanes, plan.steps steps per loop iteration of the substitution), or strided warp-wide segments.
template <typename T, int M, typename SA, typename SB>
hsmaError_t launch_segments(const SolveProblem<T, SA, SB>& p, const SmallPlan& plan, const DeviceInfo& dev,
                            hsmaStream_t stream) {
  if constexpr (kNarrowSegments) {
    if (plan.lanes == kNarrowSegment && !plan.blocked) return launch_narrow_segments<T, M>(p, dev, stream);
  }
  if (plan.blocked) {
    constexpr int kSeg = M / 2;
    switch (plan.steps) {
      case 1: return launch_segments<T, M, kSeg, true, kBlockedThreads, 1>(p, dev, stream);
      case 2: return launch_segments<T, M, kSeg, true, kBlockedThreads, 2>(p, dev, stream);
      case 4: return launch_segments<T, M, kSeg, true, kBlockedThreads, 4>(p, dev, stream);
      default: return launch_segments<T, M, kSeg, true, kBlockedThreads, kSeg>(p, dev, stream);
    }
  }
  return launch_segments<T, M, kSegment>(p, dev, stream);
}

// The segment kernel the plan names: 32, 48 (8-lane segments of complex types) or 64 rows.
template <typename T, typename SA, typename SB>
hsmaError_t run_segments(const SolveProblem<T, SA, SB>& p, const SmallPlan& plan, const DeviceInfo& dev,
                         hsmaStream_t stream) {
  if (plan.rows == 32) return launch_segments<T, 32>(p, plan, dev, stream);
  if constexpr (kNarrowSegments && small_dtype_complex(small_dtype<T>())) {
    if (plan.rows == 48) return launch_narrow_segments<T, 48>(p, dev, stream);
  }
  return launch_segments<T, 64>(p, plan, dev, stream);
}

// The warp-task kernel the plan names (32 or 64 rows), where its triangles fit.
template <typename T, typename SA, typename SB>
hsmaError_t run_warp_tasks(const SolveProblem<T, SA, SB>& p, const SmallPlan& plan, const DeviceInfo& dev,
                           hsmaStream_t stream) {
  if (plan.rows == 32) {
    if constexpr (warp_tasks_fit(small_dtype<T>(), 32)) return launch_warp_tasks<T, 32>(p, dev, stream);
  } else {
    if constexpr (warp_tasks_fit(small_dtype<T>(), 64)) return launch_warp_tasks<T, 64>(p, dev, stream);
  }
  return hsmaError_t(1);  // (not a plan of select.h)
}

}  // namespace
}  // namespace hsma
