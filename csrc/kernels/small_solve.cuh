// Small-scale direct solve (the HSMA-TRSM paper's small regime, m <= 64): L X = alpha B with the
// whole triangle of L in shared memory. Kernels of one family, chosen by the launcher (two more are
// described at their definitions: the tensor-core kernel, for complex128 batches of 49-64 rows on
// sm_80+ (and on sm_90+ of 33-48 rows in large batches with A batched and 48-128 columns per
// matrix), and the register-tiled tile kernel, for complex64 batches of 49-64 rows with 64 or more
// columns per matrix and complex128 ones that the tensor-core kernel does not take; see
// launch_small_solve):
//
// 1. Column kernel (a column of X per thread, in registers), for batches and wide B when
//    M * sizeof(T) <= 512 bytes (every dtype at m <= 32; float32, float64 and complex64 up to
//    m = 64; see the split variant below). The order is rounded up to a compile-time M in
//    {8, 16, 32, 48, 64} (L padded with identity), so the substitution is fully unrolled over
//    registers. The whole block stages the triangles of its tasks (several (matrix, column tile)
//    tasks share a block when the tiles are narrow) into shared memory in L's own layout, so that
//    consecutive threads read consecutive addresses and write consecutive words (no bank
//    conflicts); the substitution form follows the layout: row-major L uses the dot-product form,
//    reading row i as vectors, column-major L the axpy form, reading column k as vectors (every
//    lane reads the same address: a broadcast).
//    The right-hand sides are loaded into registers first; the triangles follow by cp.async
//    (sm_80+), 16 bytes per copy when L's rows are contiguous and aligned, so every load of a
//    task is in flight at once without holding registers. With many blocks, a block has just
//    its solving threads (registers, not threads, bound how many run per multiprocessor).
//    Split variant (H = M / 2 rows per thread at a time: 32 of 64 for float32 and float64 batches, and
//    complex128 on request, 16 of 32 for complex64 batches; 16-byte types' triangle packed, and
//    row-major float64's, 64-row complex64's and, where A is batched, float32's): the
//    top half is solved and stored to X, then the bottom half is loaded, updated by the top half
//    read back from X (float32: from a copy kept in shared memory), and solved.
//
// 2. Segment kernel, for a few columns of a triangle beyond 16 rows (a single solve) and for
//    complex batches beyond 48 rows (complex64) or 32 rows (complex128) (8-lane segments;
//    beyond 48 rows complex128 takes the tensor-core kernel instead on sm_80+, and large batches
//    take the tile kernel or the tensor-core kernel as launch_small_solve says):
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
//
// All take the division off the critical path: each pivot's reciprocal is computed once per
// matrix while the triangle is loaded, and x_k is multiplied by it, unless only a true division
// is exact enough there (zero, subnormal, huge or non-finite pivots; see pivot_reciprocal).
// The kernels and launcher are templates here; small_solve_<dtype>.cu instantiate one data type
// each, so that the four compile in parallel.
#pragma once
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "trsm_problem.h"

namespace hsma {
namespace {

constexpr int kSmallThreads = 256;
constexpr int kColumnThreads = 128;
constexpr int kColumnMaxBytes = 512;  // M * sizeof(T) for the column kernel's registers
constexpr int kMinTileColumns = 8;    // narrowest column tile when spreading a few columns over SMs
constexpr int kLoadUnroll = 8;
constexpr int64_t kFewColumns = 2048;  // batch * n up to which m > 16 takes the segment kernel
constexpr int64_t kWarpTaskMaxColumns = 4;    // columns per matrix up to which a batch takes one warp per matrix
constexpr int kWarpTaskMinBatchPerSM = 4;     // ... when there are at least this many matrices per multiprocessor

// (batch entry, column tile) of a task; no division when there is one tile per matrix.
__device__ inline void task_coords(int64_t task, int64_t ntiles, int64_t& bidx, int64_t& tile) {
  if (ntiles == 1) {
    bidx = task;
    tile = 0;
    return;
  }
  bidx = task / ntiles;
  tile = task - bidx * ntiles;
}

// Stages elements [first, total) (step `stride`) of triangles into shared memory: locate(e, dst,
// fill) gives element e's shared-memory slot in dst (nullptr: not stored) and returns its global
// address, or nullptr when the slot takes `fill` instead (identity padding, a unit diagonal).
// With `async` (p.async_copy) and cp.async available, every copy is in flight at once and holds
// no register; otherwise kUnroll loads are in flight before their stores. The copies have landed
// after copy_async_wait_all() and a barrier. No conjugation here: see finish_pivots.
template <typename T, int kUnroll, typename Locate>
__device__ __forceinline__ void stage_triangle(bool async, unsigned first, unsigned total, unsigned stride,
                                               Locate locate) {
#if HSMA_ASYNC_COPY
  if (async) {
#pragma unroll 1
    for (unsigned e = first; e < total; e += stride) {
      T* dst;
      T fill;
      const T* src = locate(e, dst, fill);
      if (dst == nullptr) continue;
      if (src != nullptr)
        copy_async(dst, src);
      else
        *dst = fill;
    }
    return;
  }
#endif
  (void)async;
#pragma unroll 1
  for (unsigned e0 = first; e0 < total; e0 += stride * kUnroll) {
    T v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const unsigned e = e0 + u * stride;
      T* dst = nullptr;
      T fill = T(0);
      const T* src = e < total ? locate(e, dst, fill) : nullptr;
      v[u] = src != nullptr ? *src : fill;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const unsigned e = e0 + u * stride;
      T* dst = nullptr;
      T fill;
      if (e < total) locate(e, dst, fill);
      if (dst != nullptr) *dst = v[u];
    }
  }
}

// After a triangle's staged copies have landed: conjugates its n staged elements (when p.conj;
// followed by a barrier), then, for each pivot d, calls pivot(d, rcp_slot, flag) (which returns the
// pivot's address, and may first write it: see load_packed_triangle), stores the pivot's
// reciprocal (1 for a unit diagonal) in *rcp_slot and sets *flag when it needs a true division
// (see pivot_reciprocal).
template <typename T, typename Pivot, typename Barrier>
__device__ __forceinline__ void finish_pivots(T* Ls, int n, int npivots, const SolveProblem<T>& p, int t,
                                              int nthreads, Pivot pivot, Barrier barrier) {
  if (p.conj) {
    for (int e = t; e < n; e += nthreads) Ls[e] = conj_if(Ls[e], true);
    barrier();
  }
#pragma unroll 1
  for (int d = t; d < npivots; d += nthreads) {
    int* exact;
    T* rcp_slot;
    const T* diag = pivot(d, rcp_slot, exact);
    T rcp = T(1);
    if (!p.unit) {
      rcp = pivot_reciprocal(*diag);
      if (is_zero(rcp)) *exact = 1;
    }
    *rcp_slot = rcp;
  }
}

// Start of column k of a lower triangle packed column by column (rows k..M-1 of column k).
template <int M> __host__ __device__ constexpr int packed_start(int k) { return k * M - (k * (k - 1)) / 2; }

// Where the segment kernels keep L(i, k) of an M x M lower triangle in shared memory, column by
// column. The lanes of a segment own kRows rows of a column each. kRows = 1 (the strided
// segments, whose lane l owns rows l + kSeg s: any kSeg): column k holds rows k..M-1, packed
// (at(i, k) = packed_start(k) + i - k). kRows > 1 (blocked segments: lane p owns the contiguous
// rows kRows p + s, s < kRows): column k holds, for each s, row kRows p + s of every lane p from
// the one holding row k on, lane p's at offset p, so that the lanes of a segment read consecutive
// words for one (k, s) (no bank conflicts); the slots of the rows above k in that first lane's
// block are never written, and read only into results that are thrown away (see
// substitute_segment_blocked).
template <int M, int kRows>
struct SegmentLayout {
  static_assert(M % kRows == 0, "SegmentLayout: whole blocks of rows");
  static constexpr int kLanes = M / kRows;
  __host__ __device__ static constexpr int start(int k) {  // column k
    const int q = k / kRows, t = k % kRows;
    return kRows * kRows * (q * kLanes - q * (q - 1) / 2) + t * kRows * (kLanes - q);
  }
  static constexpr int kSize = start(M);
  __host__ __device__ static constexpr int at(int i, int k) {
    return start(k) + (i % kRows) * (kLanes - k / kRows) + (i / kRows - k / kRows);
  }
  // at(kRows q + s, kRows q + t), the diagonal block q's entries for a run-time q (no divisions).
  __host__ __device__ static constexpr int block_at(int q, int s, int t) {
    return kRows * kRows * (q * kLanes - q * (q - 1) / 2) + (t * kRows + s) * (kLanes - q);
  }
};
static_assert(SegmentLayout<64, 1>::at(5, 3) == packed_start<64>(3) + 2 && SegmentLayout<64, 1>::kSize == 64 * 65 / 2,
              "SegmentLayout: one row per lane is packed by columns");
static_assert(SegmentLayout<64, 2>::block_at(7, 1, 0) == SegmentLayout<64, 2>::at(15, 14) &&
                  SegmentLayout<64, 2>::block_at(31, 1, 1) == SegmentLayout<64, 2>::at(63, 63) &&
                  SegmentLayout<32, 2>::block_at(5, 0, 1) == SegmentLayout<32, 2>::at(10, 11),
              "SegmentLayout: block_at is at within a diagonal block");

// Where the column kernel keeps L(i, k), i >= k, of a group's triangle in shared memory: the
// M x M square in L's own layout (kRowMajor: at(i, k) = i * M + k, else k * M + i), or (kPacked)
// only the lower triangle, packed row by row (kRowMajor) or column by column, each row (column)
// starting on a 16-byte boundary, so that the substitution reads whole 16-byte vectors and rows
// can be copied in 16-byte pieces: row i holds L(i, 0..i) padded to a multiple of
// kV = 16 / sizeof(T) elements; column k holds the rows from kV * floor(k / kV) on (those above k
// are padding). For 16-byte types (kV = 1) that is the plain packed triangle.
template <typename T, int M, bool kRowMajor, bool kPacked>
struct ColumnLayout {
  static constexpr int kV = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));
  __host__ __device__ static constexpr int row_start(int i) {
    return kV * kV * (i / kV) * (i / kV + 1) / 2 + (i % kV) * kV * (i / kV + 1);
  }
  __host__ __device__ static constexpr int col_start(int k) {
    return k * M - kV * (kV * (k / kV) * (k / kV - 1) / 2 + (k % kV) * (k / kV));
  }
  static constexpr int kTriangle = !kPacked ? M * M : kRowMajor ? row_start(M) : col_start(M);
  __host__ __device__ static constexpr int at(int i, int k) {
    if constexpr (kPacked)
      return kRowMajor ? row_start(i) + k : col_start(k) + i - kV * (k / kV);
    else
      return kRowMajor ? i * M + k : k * M + i;
  }
};
static_assert(ColumnLayout<float, 64, true, true>::kTriangle == 2176 &&
                  ColumnLayout<float, 64, false, true>::kTriangle == 2176 &&
                  ColumnLayout<float, 64, true, true>::at(5, 2) == 4 + 4 + 4 + 4 + 8 + 2 &&
                  ColumnLayout<float, 64, false, true>::at(9, 5) == 64 * 4 + 60 + 9 - 4 &&
                  ColumnLayout<double, 64, true, true>::kTriangle == 2 * 32 * 33 &&
                  ColumnLayout<complex<double>, 32, false, true>::at(7, 3) == packed_start<32>(3) + 4 &&
                  ColumnLayout<complex<double>, 32, true, true>::kTriangle == 32 * 33 / 2,
              "ColumnLayout: padded packed offsets");

// In-register substitution of H rows x of one column (rows kBase.. of the padded triangle)
// against the diagonal block L(kBase.., kBase..) in shared memory. kRowMajor: the row
// (dot-product) form, x_i = (x_i - sum_k<i L(i, k) x_k) / L(i, i), reading rows as vectors
// (four partial sums keep the dependent chain short); otherwise the column (axpy) form, reading
// columns as vectors. Rs holds the pivots' reciprocals. kExact: some pivot needs a true division
// (see pivot_reciprocal).
template <typename T, int H, typename Layout, int kBase, bool kRowMajor, bool kExact>
__device__ __forceinline__ void substitute(T (&x)[H], const T* Ls, const T* Rs, bool unit) {
  auto L = [&](int i, int k) -> T { return Ls[Layout::at(kBase + i, kBase + k)]; };
  auto pivot = [&](T v, int k) -> T {
    if (unit) return v;
    if constexpr (kExact) return divide_by_pivot(v, L(k, k), Rs[kBase + k]);
    return v * Rs[kBase + k];
  };
  if constexpr (kRowMajor) {
#pragma unroll
    for (int i = 0; i < H; ++i) {
      T acc[4] = {x[i], T(0), T(0), T(0)};
#pragma unroll
      for (int k = 0; k < i; ++k) acc[k & 3] = fms(acc[k & 3], L(i, k), x[k]);
      x[i] = pivot((acc[0] + acc[1]) + (acc[2] + acc[3]), i);
    }
  } else {
#pragma unroll
    for (int k = 0; k < H; ++k) {
      x[k] = pivot(x[k], k);
#pragma unroll
      for (int i = k + 1; i < H; ++i) x[i] = fms(x[i], L(i, k), x[k]);
    }
  }
}

// The split kernel's update of rows kBase.. by the rows above them, already solved and stored:
// x_r -= sum_{k < kBase} L(kBase + r, k) X(k), solved(k) reading X(k) back (from L2, or float32's
// copy in shared memory) in chunks, the next chunk's loads in flight while the current one is applied. Each x_r sums over k in order
// whichever way L is read (rows as vectors when kRowMajor, else columns).
template <typename T, int H, typename Layout, int kBase, bool kRowMajor, typename Solved>
__device__ __forceinline__ void update_from_solved(T (&x)[H], const T* Ls, Solved solved) {
  constexpr int kChunk = sizeof(T) >= 16 ? 4 : 8;
  static_assert(kBase % kChunk == 0, "update_from_solved: whole chunks");
  T cur[kChunk], next[kChunk];
#pragma unroll
  for (int c = 0; c < kChunk; ++c) cur[c] = solved(c);
#pragma unroll
  for (int k0 = 0; k0 < kBase; k0 += kChunk) {
    if (k0 + kChunk < kBase) {
#pragma unroll
      for (int c = 0; c < kChunk; ++c) next[c] = solved(k0 + kChunk + c);
    }
    if constexpr (kRowMajor) {
#pragma unroll
      for (int r = 0; r < H; ++r)
#pragma unroll
        for (int c = 0; c < kChunk; ++c) x[r] = fms(x[r], Ls[Layout::at(kBase + r, k0 + c)], cur[c]);
    } else {
#pragma unroll
      for (int c = 0; c < kChunk; ++c)
#pragma unroll
        for (int r = 0; r < H; ++r) x[r] = fms(x[r], Ls[Layout::at(kBase + r, k0 + c)], cur[c]);
    }
#pragma unroll
    for (int c = 0; c < kChunk; ++c) cur[c] = next[c];
  }
}

// stage_triangle's locate for the column kernels: element e of consecutive groups' M x M squares
// (consecutive e consecutive in L's layout: along rows when kRowMajor) to its slot at
// group_smem(gg) + Layout::at(i, k) (the upper triangle, never read, is not stored), read from L at
// offset group_l(gg); identity padding beyond m, 1 on a unit diagonal.
template <typename T, int M, bool kRowMajor, typename Layout, typename GroupSmem, typename GroupL>
__device__ __forceinline__ auto column_triangle_locate(const SolveProblem<T>& p, GroupSmem group_smem,
                                                       GroupL group_l) {
  return [&p, group_smem, group_l](unsigned e, T*& dst, T& fill) -> const T* {
    const unsigned gg = e / (M * M), r = e % (M * M), um = static_cast<unsigned>(p.m);  // (shifts and masks for M = 2^j)
    const unsigned i = kRowMajor ? r / M : r % M, k = kRowMajor ? r % M : r / M;
    dst = i >= k ? group_smem(gg) + Layout::at(i, k) : nullptr;
    fill = T(i == k ? 1 : 0);
    return i < um && k < um && (i > k || (i == k && !p.unit)) ? p.L + group_l(gg) + i * p.l.row + k * p.l.col
                                                               : nullptr;
  };
}

// A column-kernel thread's solve of its column of X (rows 0..m-1, at X with row stride p.x.row),
// H rows at a time: x holds rows 0..H-1 of B on entry. Each row block is scaled by alpha, updated
// by the rows above it (the split form: solved(k) reads X(k) back, from X or from wherever
// keep(r, x_r) put the top block's solved rows), substituted against the block's diagonal triangle
// and stored; the bottom block is loaded by load_rows(H).
template <typename T, int M, int H, typename Layout, bool kRowMajor, typename LoadRows, typename Solved,
          typename Keep>
__device__ __forceinline__ void solve_column(T (&x)[H], const T* Ls, const T* Rs, const SolveProblem<T>& p,
                                             bool exact_task, T* X, LoadRows load_rows, Solved solved, Keep keep) {
  const int m = static_cast<int>(p.m);
  const int64_t xrow = p.x.row;
  auto solve_and_store = [&](auto base_rows) {  // rows base_rows.. (a compile-time constant)
    constexpr int kBase = decltype(base_rows)::value;
#pragma unroll
    for (int r = 0; r < H; ++r) x[r] = p.alpha * x[r];
    if constexpr (kBase > 0) update_from_solved<T, H, Layout, kBase, kRowMajor>(x, Ls, solved);
    if (exact_task)
      substitute<T, H, Layout, kBase, kRowMajor, true>(x, Ls, Rs, p.unit);
    else
      substitute<T, H, Layout, kBase, kRowMajor, false>(x, Ls, Rs, p.unit);
    T* Xr = X + kBase * xrow;
#pragma unroll
    for (int r = 0; r < H; ++r, Xr += xrow)
      if (kBase + r < m) *Xr = x[r];
    if constexpr (kBase == 0 && H < M) {
#pragma unroll
      for (int r = 0; r < H; ++r) keep(r, x[r]);
    }
  };
  solve_and_store(std::integral_constant<int, 0>());
  if constexpr (H < M) {
    if (m > H) {
      load_rows(H);
      solve_and_store(std::integral_constant<int, H>());
    }
  }
}

// Column kernel. Threads [0, groups * tc) solve: group g takes task base + g, its thread t the
// column tile * tc + t. All threads of the block load the groups' triangles together (so a
// single narrow task still loads its triangle with the whole block), each diagonal entry's
// loader storing the pivot's reciprocal too. The solving threads' right-hand sides are loaded
// into registers before the triangles, so both loads are in flight at once. The triangle keeps
// the layout of L in memory (kRowMajor when L's rows are contiguous-ish): consecutive threads
// then read consecutive addresses and write consecutive shared-memory words (no bank conflicts).
// A thread holds H of its column's M rows in registers: H = M, or (the split kernel, for columns
// too long for one thread's registers, or for fewer registers per thread) H = M / 2: the top half
// is solved and stored, then the bottom half is loaded, updated by the top half read back from X
// (float32: from a copy in shared memory, see column_stash), and solved.
// Registers are left to ptxas except for float64's split kernel and complex128's whole columns of
// 32 rows (column_max_registers): capped for more resident blocks (__launch_bounds__ minimum blocks
// of 3, 5 or 6) the other column kernels lost or tied in every batch measured on the H200 (batch
// 10000 of 32x32 complex128 150.6 us at 168 registers vs 128.5; batch 4096 of 64x64 float32 68.0 /
// 71.1 / 98.8 vs 67.6: profile_cases_..._column-caps.csv; the float32 split kernel at 96 registers
// 74.8 vs 69.5: profile_cases_..._split-layouts.csv; packed and at 112, 96 or 88 registers 67.5,
// 76.4, 75.1 vs 67.7: profile_cases_..._column-regs.csv).
// float64's split kernel keeps a packed triangle (17 KB instead of 33) and is capped at 128
// registers (4 blocks of 128 threads, 8 of 64; 8 bytes spilled), so that 8 matrices are solved at
// once per multiprocessor where shared memory (unpacked) or registers (148 uncapped) allowed 6:
// batch 4096 of 64x64 121.5 vs 136.2 us, 128 unit columns 212.1 vs 222.1 (same file).
// (Row-major L only: the column-major form spilled 128 bytes at that cap and was not measured.)
// complex64's split kernel at 64 rows (only where forced, HSMA_TRSM_COLUMN_ROWS=32) is packed and
// capped the same way (128 registers, 16 bytes spilled): batch 4096 of 64x64 370.2 us, against
// 502.5 unpacked and 499.8 uncapped (131 registers), and against 314.4 for the 8-lane segment
// kernel, which the launcher keeps (profile_cases_..._c64-split.csv). Not its 16-row split of
// 17-32 rows (the launcher's choice for complex64 batches), which the cap would take from 84
// registers (5 blocks of 128 threads per multiprocessor) to 110 (4).
template <typename T, int M, int H, bool kRowMajor>
__host__ __device__ constexpr bool column_packed_capped() {  // row-major 8-byte split kernels packed and capped
  return H < M && kRowMajor && (std::is_same_v<T, double> || (std::is_same_v<T, complex<float>> && M == 64));
}
template <typename T, int M, int H, bool kRowMajor>
__host__ __device__ constexpr bool column_packed() {  // the triangle packed (ColumnLayout)
  return (H < M && sizeof(T) >= 16) || column_packed_capped<T, M, H, kRowMajor>();
}
template <typename T, int M, int H, bool kRowMajor>
__host__ __device__ constexpr int column_min_blocks() {  // __launch_bounds__'s minimum blocks (0: none)
  // (Not on AMD, where hipcc reads the argument as minimum waves per execution unit, and which was
  // not measured.)
  return !HSMA_HIP && column_packed_capped<T, M, H, kRowMajor>() ? 4 : 0;
}
// float32's split kernel packs its triangle too (ColumnLayout, rows padded to 16 bytes: 8.5 KB
// instead of 16) where A is batched (H200, batch 4096 of 64x64: 66.5 vs 67.7 us; 128 unit columns
// 115.2 vs 115.3; the same 125 registers and 8 blocks per multiprocessor), but not where one A
// serves the call (A broadcast: 68.4 vs 63.0 us), so the launcher picks the layout at run time
// (profile_cases_..._column-regs.csv).
template <typename T, int M, int H>
__host__ __device__ constexpr bool column_packs_batched_a() {  // (row-major L)
  return !HSMA_HIP && H < M && std::is_same_v<T, float>;
}
// A register cap per thread finer than __launch_bounds__ gives for blocks of up to kColumnThreads
// threads (0: none): complex128's whole columns of 32 rows (row-major L), whose blocks in large
// batches are one warp, use 218 registers instead of 244 with a cap of 224 (no spills), so that 9
// blocks run per multiprocessor instead of 8 (H200, batch 10000 of 32x32, event-timed launches of a
// torch-free probe, scripts/small_kernel_probe.cu: mean 129.5-130.4 vs 133.3-135.1 us,
// probe_columns_...txt). The first form measured also had __launch_bounds__, which nvcc accepts
// beside __maxnreg__ only in templates, and took 208 registers: 127.2 vs 128.5 us kernel time in
// profile_cases_..._column-regs.csv, 132.1-134.7 us in the probe; caps of 200 and 184 spilled 60
// and 76 bytes: 131.7 and 132.8 us.
template <typename T, int M, int H, bool kRowMajor>
__host__ __device__ constexpr int column_max_registers() {
  return !HSMA_HIP && std::is_same_v<T, complex<double>> && M == 32 && H == M && kRowMajor ? 224 : 0;
}
// float32's split kernel (row-major L) also keeps the solved top half of its columns in shared
// memory (H x tc elements per group after the groups' triangles, thread t's rows at stride tc: no
// bank conflicts), from where the bottom half's update reads it instead of reloading X from L2
// (H200: 128 unit columns 115.7 vs 119.7 us, A broadcast 64.8 vs 66.7, 64x64 67.5 vs 67.8; float64,
// whose 8 blocks per multiprocessor it would cut to 6, 140.7 vs 122.2: profile_cases_..._stash.csv).
template <typename T, int M, int H, bool kRowMajor>
__host__ __device__ constexpr bool column_stash() {
  return H < M && kRowMajor && std::is_same_v<T, float>;
}

template <typename T, int M, int H, bool kRowMajor, bool kPacked>
__device__ __forceinline__ void solve_columns_block(const SolveProblem<T>& p, int tc, int groups, int64_t ntiles,
                                                    bool vector_rows) {
  static_assert(H == M || 2 * H == M, "solve_columns_block: one or two row blocks");
  using Layout = ColumnLayout<T, M, kRowMajor, kPacked>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // Per group, kGroupElems elements: L (see ColumnLayout), then Rs[k], the reciprocal of pivot k
  // (1 for a unit or padded diagonal). Padding beyond m is the identity.
  T* smem = reinterpret_cast<T*>(smem_raw);
  constexpr int kGroupElems = Layout::kTriangle + M;
  __shared__ int64_t l_off[kColumnThreads];  // offset of each group's triangle
  __shared__ int exact[kColumnThreads];      // the group's triangle has a pivot needing division
  const int tid = static_cast<int>(threadIdx.x), nthreads = static_cast<int>(blockDim.x);
  const int g = tid / tc, t = tid - (tid / tc) * tc;
  const bool solver = g < groups;
  const T* Ls = smem + (solver ? g : 0) * kGroupElems;
  const T* Rs = Ls + Layout::kTriangle;
  const int m = static_cast<int>(p.m);
  const int64_t ntasks = p.batch * ntiles;

  for (int64_t base = int64_t(blockIdx.x) * groups; base < ntasks; base += int64_t(gridDim.x) * groups) {
    const int nvalid = ntasks - base < groups ? static_cast<int>(ntasks - base) : groups;
    if (tid < nvalid) {
      int64_t bidx, tile, off[3];
      task_coords(base + tid, ntiles, bidx, tile);
      batch_offsets(p.bl, bidx, off);
      l_off[tid] = off[0];
    }
    // My right-hand-side column (its loads overlap the triangles' below).
    bool active = false;
    int64_t off[3] = {0, 0, 0}, j = 0;
    if (solver && g < nvalid) {
      int64_t bidx, tile;
      task_coords(base + g, ntiles, bidx, tile);
      batch_offsets(p.bl, bidx, off);
      j = tile * tc + t;
      active = j < p.n;
    }
    T x[H];
    const T* Bc = p.B + off[1] + j * p.b.col;
    auto load_rows = [&](int first) {  // rows first.. (row by row: one add per element)
      const T* B = Bc + first * p.b.row;
      const int64_t row = p.b.row;
#pragma unroll
      for (int r = 0; r < H; ++r, B += row) x[r] = (active && first + r < m) ? *B : T(0);
    };
    load_rows(0);
    __syncthreads();  // l_off is set, and the previous tasks are done with the triangles and flags
    if (tid < nvalid) exact[tid] = 0;  // (first set in finish_pivots, after the next barrier)

    // Element e of the groups' squares: consecutive e are consecutive in L's layout.
    const unsigned total = nvalid * M * M;
    if (kRowMajor && vector_rows) {
      // L's rows contiguous and 16-byte aligned, m = M (see launch_columns): 16-byte copies of the
      // pieces of rows that reach the triangle (the unused triangle and a unit diagonal they also
      // bring along are never read; with a packed layout, the pieces of a row's padded length).
      constexpr unsigned kVec = 16 / sizeof(T);
      for (unsigned c = tid; c < total / kVec; c += nthreads) {
        const unsigned e = c * kVec, gg = e / (M * M), r = e % (M * M), i = r / M, k = r % M;
        if (k <= i) copy_async_16(smem + gg * kGroupElems + Layout::at(i, k), p.L + l_off[gg] + i * p.l.row + k);
      }
    } else {
      stage_triangle<T, kLoadUnroll>(
          p.async_copy, tid, total, nthreads,
          column_triangle_locate<T, M, kRowMajor, Layout>(
              p, [smem](unsigned gg) { return smem + gg * kGroupElems; }, [&](unsigned gg) { return l_off[gg]; }));
    }
    copy_async_wait_all();
    __syncthreads();
    finish_pivots(smem, p.conj ? nvalid * kGroupElems : 0, nvalid * M, p, tid, nthreads,
                  [&](int d, T*& rcp_slot, int*& flag) -> const T* {
                    const int gg = d / M, k = d - gg * M;
                    T* Lg = smem + gg * kGroupElems;
                    rcp_slot = Lg + Layout::kTriangle + k;
                    flag = &exact[gg];
                    return Lg + Layout::at(k, k);
                  },
                  [] { __syncthreads(); });
    __syncthreads();

    if (active) {
      T* X = p.X + off[2] + j * p.x.col;
      if constexpr (column_stash<T, M, H, kRowMajor>()) {  // the top half kept in shared memory too
        T* slot = smem + groups * kGroupElems + g * H * tc + t;
        solve_column<T, M, H, Layout, kRowMajor>(
            x, Ls, Rs, p, exact[g] != 0, X, load_rows, [&](int k) { return slot[k * tc]; },
            [&](int r, T v) { slot[r * tc] = v; });
      } else {
        solve_column<T, M, H, Layout, kRowMajor>(
            x, Ls, Rs, p, exact[g] != 0, X, load_rows, [&](int k) { return reload(X + k * p.x.row); },
            [](int, T) {});
      }
    }
  }
}

// The column kernel's entry points: ptxas's register choice (within __launch_bounds__), or capped
// at column_max_registers (__maxnreg__; on the uncapped kernels even a cap of 255 would change
// ptxas's choices: the float32 split kernel took 129 registers instead of 125).
template <typename T, int M, int H, bool kRowMajor, bool kPacked>
__global__ void __launch_bounds__(kColumnThreads, (column_min_blocks<T, M, H, kRowMajor>()))
small_solve_columns_kernel(SolveProblem<T> p, int tc, int groups, int64_t ntiles, bool vector_rows) {
  grid_dependency_sync(p.dependent_launch == 1);
  solve_columns_block<T, M, H, kRowMajor, kPacked>(p, tc, groups, ntiles, vector_rows);
}
template <typename T, int M, int H, bool kRowMajor, bool kPacked>
__global__ void HSMA_MAXNREG(column_max_registers<T, M, H, kRowMajor>())
small_solve_columns_capped_kernel(SolveProblem<T> p, int tc, int groups, int64_t ntiles, bool vector_rows) {
  grid_dependency_sync(p.dependent_launch == 1);
  solve_columns_block<T, M, H, kRowMajor, kPacked>(p, tc, groups, ntiles, vector_rows);
}

// An empty kernel of this file, compiled like the others: the code the GPU loads for it says
// whether theirs waits (kernels_wait).
__global__ void dependent_launch_probe_kernel() {}

// Whether the code this GPU runs for this file's kernels waits for the kernel before it
// (grid_dependency_sync). Only code compiled for a virtual architecture of 9.0 or newer has
// griddepcontrol.wait, whatever SASS it ends up as, and cudaFuncAttributes::ptxVersion tells
// which it is (H200: 90 for compute_90 code, 80 for compute_80 code whether built as sm_90 SASS or
// JIT-compiled from PTX; probe_ptx_version_nvidia-h200_2026-12-01.txt). A build without such code
// for this GPU (e.g. TORCH_CUDA_ARCH_LIST=8.0+PTX on a Hopper GPU) therefore launches plainly: a
// dependent launch of a kernel that does not wait could read its inputs before they are written.
// Asked once per device.
inline bool kernels_wait(const DeviceInfo& dev) {
#if HSMA_HIP
  (void)dev;
  return false;
#else
  static std::atomic<int> known[64];  // per device: 0 not yet asked, 1 waits, 2 does not
  std::atomic<int>& k = known[dev.device & 63];
  int v = k.load(std::memory_order_relaxed);
  if (v == 0) {
    cudaFuncAttributes a;
    const cudaError_t err = cudaFuncGetAttributes(&a, dependent_launch_probe_kernel);
    if (err != cudaSuccess) (void)cudaGetLastError();
    v = err == cudaSuccess && a.ptxVersion >= 90 ? 1 : 2;
    k.store(v, std::memory_order_relaxed);
  }
  return v == 1;
#endif
}

// Whether a launch asks for programmatic dependent launch (launch_kernel): on sm_90+ where the
// kernels' code waits (kernels_wait), unless HSMA_TRSM_PDL=0. Every kernel of this file calls
// grid_dependency_sync() before its first global access, and releases the next kernel's launch
// there when p.dependent_launch = 1 (else the next kernel launches when this one completes).
template <typename T> bool dependent(const SolveProblem<T>& p, const DeviceInfo& dev) {
  return p.dependent_launch != 0 && dev.cc_major >= 9 && kernels_wait(dev);
}

// p with the release point of its launch resolved: the forced one (HSMA_TRSM_PDL), else when the
// kernel starts (`early`) or when it completes. On the H200 (small and batched suites of the
// benchmark, GPU-only times from CUDA-graph replay; benchmarks/results/*_pdl-start*.csv,
// *_pdl-modes-*.csv, and for the shipped choice *_pdl{0,1}-forced.csv beside the untagged run of
// fb54cbf), releasing at the start saved 0.4-0.5 us per single solve (64x64: float32 3.72-3.76
// vs 4.19-4.21 us plain, complex128 6.12-6.46 vs 6.66-6.97) and 0.3-0.9 us on most batches, where
// releasing at completion saved about half as much; but releasing at the start lost where the
// grid is sized to the GPU (the folding tensor-core kernel: A broadcast over batch 4096 of 64x64
// complex128 241.7-243.2 us against 238.9-241.1 plain and 238.1-239.5 released at completion) and
// for the column kernel at 8 rows of 8-byte types (batch 10000 of 8x8 complex64 5.89-5.95 us
// against 4.85-4.87 and 4.46-4.51; float64 4.42-4.60 against 4.50-4.53 and 4.15-4.21), which
// release at completion. The price, measured in the same runs: single solves that take those
// launches too (8 rows, one column, float64 / complex64: 1.99 / 2.32 us against 1.67 / 1.95
// released at the start and 2.12 / 2.46 plain; a float64 64x4096 solve, folded: 7.52 against 7.25
// and 7.78), and the folding kernel's single 64x4096 complex128 solve varies between runs either
// way (15.66-16.29 released at the start, 15.28 and 15.97 at completion, 15.62-16.12 plain).
template <typename T> SolveProblem<T> released(const SolveProblem<T>& p, bool early) {
  SolveProblem<T> q = p;
  if (q.dependent_launch < 0) q.dependent_launch = early ? 1 : 2;
  return q;
}

// kernel<<<grid, block, smem, stream>>>(p, args...) through launch_kernel: a dependent launch where
// dependent() says so, p with its release point resolved (`early`: the launcher's choice, see
// released). Every launch of this file's kernels goes through here.
template <typename T, typename... Params, typename... Args>
hsmaError_t launch_small(void (*kernel)(SolveProblem<T>, Params...), dim3 grid, dim3 block, size_t smem,
                         hsmaStream_t stream, const SolveProblem<T>& p, const DeviceInfo& dev, bool early,
                         Args... args) {
  return launch_kernel(kernel, grid, block, smem, stream, dependent(p, dev), released(p, early), args...);
}

// Whether one A serves every task of a problem: a single solve, or A broadcast over the batch.
template <typename T> bool shares_a(const SolveProblem<T>& p) {
  bool shared = true;
  for (int d = 0; d < p.bl.ndim; ++d) shared = shared && (p.bl.size[d] == 1 || p.bl.stride[0][d] == 0);
  return shared;
}

// Columns per task of the column kernels: n rounded up to a power of two, at most the block;
// narrower (more tasks on more multiprocessors, each loading its own copy of L) while the grid
// would leave multiprocessors idle: a single solve is a chain of M dependent steps per column.
template <typename T> int64_t column_tile_width(const SolveProblem<T>& p, const DeviceInfo& dev) {
  int64_t tc = 1;
  while (tc < p.n && tc < kColumnThreads) tc *= 2;
  while (tc > kMinTileColumns && p.batch * ((p.n + tc - 1) / tc) < dev.multiprocessors) tc /= 2;
  return tc;
}

template <typename T, int M, int H, bool kRowMajor, bool kPacked>
hsmaError_t launch_columns_as(const SolveProblem<T>& p, const DeviceInfo& dev, hsmaStream_t stream) {
  const int64_t tc = column_tile_width(p, dev);
  const int64_t ntiles = (p.n + tc - 1) / tc;
  const int64_t ntasks = p.batch * ntiles;
  const int64_t group_bytes =
      int64_t(ColumnLayout<T, M, kRowMajor, kPacked>::kTriangle + M + (column_stash<T, M, H, kRowMajor>() ? H * tc : 0)) *
      sizeof(T);
  const int64_t budget = kSharedBudgetBytes - kColumnThreads * int64_t(sizeof(int64_t) + sizeof(int));
  int64_t groups = kColumnThreads / tc;
  // Many tasks whose columns fill two warps or more (or one warp, with whole columns): one task per
  // block, so that blocks start and finish one matrix at a time (H200, batch 4096, two 64-column
  // tasks per block -> one: 64x64 float32 68.0 vs 69.5 us, A broadcast 62.6 vs 64.6; 48x48 float32
  // 42.6 vs 44.5, float64 69.1 vs 71.7: profile_cases_..._split-layouts.csv; batch 10000 of 32x32,
  // four 32-column tasks per block -> one: float32 32.0 vs 32.5, float64 57.8 vs 59.0, complex128
  // 128.9 vs 130.4; complex64's split kernel lost, 77.8 vs 73.5: profile_cases_..._stash.csv).
  if ((tc >= 2 * int64_t(dev.warp_size) || (tc >= dev.warp_size && H == M)) &&
      ntasks >= 4 * int64_t(dev.multiprocessors))
    groups = 1;
  while (groups > 1 && groups * group_bytes > budget) groups /= 2;
  while (groups > 1 && ntasks / groups < dev.multiprocessors) groups /= 2;  // spread few tasks over SMs
  const int64_t blocks = (ntasks + groups - 1) / groups;
  const unsigned grid = small_grid(p, blocks);
  // Threads beyond the groups' columns only help load the triangles. When there are blocks enough
  // to fill the GPU several times, leave them out: blocks of just the solving threads (rounded up to
  // whole warps) let more triangles be solved at once where registers bound the resident threads
  // (a float64 column of 64 rows: 64 of a 128-thread block's threads would solve).
  int64_t threads = kColumnThreads;
  if (blocks >= 4 * int64_t(dev.multiprocessors)) {
    const int64_t warp = dev.warp_size;
    threads = std::max<int64_t>(warp, (groups * tc + warp - 1) / warp * warp);
    threads = std::min<int64_t>(threads, kColumnThreads);
  }
  // Whole 16-byte pieces of L's rows can be copied with cp.async when the rows are contiguous and
  // every row of every batch entry starts 16-byte aligned, and there is no padding (m = M).
  constexpr int64_t kVec = 16 / sizeof(T);
  bool vector_rows = !HSMA_HIP && p.async_copy && kRowMajor && p.l.col == 1 && p.m == M && p.l.row % kVec == 0 &&
                     reinterpret_cast<uintptr_t>(p.L) % 16 == 0;
  for (int d = 0; d < p.bl.ndim; ++d) vector_rows = vector_rows && p.bl.stride[0][d] % kVec == 0;
  const size_t smem = static_cast<size_t>(groups * group_bytes);
  const unsigned block = static_cast<unsigned>(threads);
  const bool early = !(M == 8 && sizeof(T) == 8);  // (see released)
  if constexpr (column_max_registers<T, M, H, kRowMajor>() > 0)
    return launch_small(small_solve_columns_capped_kernel<T, M, H, kRowMajor, kPacked>, grid, block, smem, stream, p,
                        dev, early, int(tc), int(groups), ntiles, vector_rows);
  else
    return launch_small(small_solve_columns_kernel<T, M, H, kRowMajor, kPacked>, grid, block, smem, stream, p, dev,
                        early, int(tc), int(groups), ntiles, vector_rows);
}

// The column kernel with the layout of L's triangle in shared memory fixed at compile time: rows
// (kRowMajor) when L's rows are contiguous-ish, packed or not (column_packed, and for float32's split
// kernel column_packs_batched_a where A is batched).
template <typename T, int M, int H = M>
hsmaError_t launch_columns(const SolveProblem<T>& p, const DeviceInfo& dev, hsmaStream_t stream) {
  const bool row_major = (p.l.col < 0 ? -p.l.col : p.l.col) <= (p.l.row < 0 ? -p.l.row : p.l.row);
  if (!row_major) return launch_columns_as<T, M, H, false, column_packed<T, M, H, false>()>(p, dev, stream);
  if constexpr (column_packs_batched_a<T, M, H>()) {
    if (!shares_a(p)) return launch_columns_as<T, M, H, true, true>(p, dev, stream);
  }
  return launch_columns_as<T, M, H, true, column_packed<T, M, H, true>()>(p, dev, stream);
}

// Lanes per column of the launcher's warp-wide segments (single solves and other few-column cases;
// also on 64-wide wavefronts); blocked rows use M / 2 of them (kBlockedRows).
constexpr int kSegment = 32;


#if HSMA_ASYNC_COPY
// cp.async staging of the lower triangle into the packed columns of SegmentLayout<M, 1> (column
// k: rows k..M-1 at packed_start(k) + i - k) by kThreads >= M threads (whole warps), visiting
// only the triangle's slots: thread t keeps the fast index f = t % M of L (consecutive threads
// read consecutive addresses) and walks the slow index sl = t / M + S j, S = kThreads / M; its
// slots are the j from the diagonal on (k_fast: rows i = sl of column k = f) or up to it
// (columns k = sl of row i = f). A warp's lanes step j together over the union of their ranges,
// each copying where j is in its own, so that one warp-wide copy reads one row (k_fast) or
// column of L (where M is a multiple of 32; at M = 48 a warp spans two), and the addresses only
// step: a row step moves one slot down the packed column, a column step by the rest of the
// column, one element less each time. Slots outside m x m are zero-filled; the diagonal is
// skipped for a unit triangle (finish_pivots writes the ones).
// Nsight Compute on the H200 (tile kernel, batch 4096 of 64x64 complex64): walking the whole
// square with each slot's position computed, as the general path does, took 34 instructions per
// 8-byte copy and 12% of the kernel's instructions; here about 8 (SASS, unrolled by four). H200
// kernel time with this staging and the tile kernel's stepped B and X pointers, batch 4096 of
// 64x64: complex64 180.0 against 204.1 us, complex128 333.8 against 320.8 (not resolved; see
// docs/kernels.md); with each thread's loop unrolled on its own (the lanes' rows drifting
// apart), complex64 took 201.5 (profile_cases_..._2026-12-02_lockstep.csv, _lean-staging.csv).
template <typename T, int M, int kThreads>
__device__ __forceinline__ void stage_packed_columns(T* Ls, const T* L, const SolveProblem<T>& p, bool k_fast, int t) {
  static_assert(kThreads >= M && kThreads % 32 == 0, "stage_packed_columns: a thread per fast index, whole warps");
  constexpr int S = kThreads / M;
  const int f = t % M, sl0 = t / M, m = static_cast<int>(p.m), u = p.unit ? 1 : 0;
  int jf, je;  // this thread's slots: j in [jf, je)
  if (k_fast) {
    jf = f + u <= sl0 ? 0 : (f + u - sl0 + S - 1) / S;
    je = (M - sl0 + S - 1) / S;
  } else {
    jf = 0;
    je = f - u < sl0 ? 0 : (f - u - sl0) / S + 1;
  }
  if (t >= S * M || jf >= je) {  // (threads beyond whole steps idle)
    jf = INT_MAX;
    je = INT_MIN;
  }
  const int jlo = __reduce_min_sync(0xffffffffu, jf), jhi = __reduce_max_sync(0xffffffffu, je);
  if (jlo >= jhi) return;  // (warp-uniform)
  if (k_fast) {  // column k = f, rows i = sl0 + S j
    // (M a multiple of 32: a warp's lanes share sl0, so their ranges end together at jhi)
    constexpr bool kSharedEnd = M % 32 == 0;
    const int k = f, i_end = k < m ? m : 0;  // rows below i_end are copied, the rest zero
    auto rows = [&](auto all_valid) {  // all_valid: m = M, no row or column to zero
      int i = sl0 + S * jlo;
      T* dst = Ls + packed_start<M>(k) + (i - k);  // (above the column while j < jf: not written)
      const T* src = L + k * p.l.col + i * p.l.row;
      const int64_t step = S * p.l.row;
#pragma unroll 4
      for (int j = jlo; j < jhi; ++j, i += S, dst += S, src += step) {
        const bool valid = decltype(all_valid)::value || i < i_end;
        copy_async_or_zero(dst, valid ? src : L, j >= jf && (kSharedEnd || j < je), valid);
      }
    };
    if (m == M)
      rows(std::true_type());
    else
      rows(std::false_type());
  } else {  // row i = f, columns k = sl0 + S j; all of them copied (f < m) or zeroed
    const bool valid = f < m;
    T* dst = Ls + packed_start<M>(sl0) + (f - sl0);
    int d = S * (M - 1 - sl0) - S * (S - 1) / 2;  // at(f, k + S) - at(f, k) at k = sl0, then S * S less per step
    const T* src = valid ? L + f * p.l.row + sl0 * p.l.col : L;
    const int64_t step = valid ? S * p.l.col : 0;
#pragma unroll 4
    for (int j = 0; j < jhi; ++j, dst += d, d -= S * S, src += step) copy_async_or_zero(dst, src, j < je, valid);
  }
}
#endif

// A callback that does nothing (load_packed_triangle's default `issued`). A functor, not a lambda
// converted to a function pointer: that conversion is a constexpr host function, which device code
// may call only under nvcc's --expt-relaxed-constexpr (torch's extension build passes it; a bare
// nvcc does not, and there, at sm_90, the code after such a call was dropped as unreachable: the
// segment, warp-task and substituting tensor-core kernels lost their whole body, the folding
// tensor-core kernels their staging and fold; scripts/compile_check.sh now compares the two builds).
struct NoCallback {
  __device__ void operator()() const {}
};

// Loads L's lower triangle (conj applied, the unused triangle never read) into Ls, column by column
// as Layout places it (by default packed: column k holds rows k..M-1 at packed_start(k)) and
// padded to the identity up to M, and
// the pivots' reciprocals into Rs (1 for a unit or padded diagonal); sets *exact when a pivot
// needs a true division. Thread t of kThreads walks the square M x M in steps of kThreads, along
// the dimension of L with the smaller stride (coalesced loads), or, with cp.async into the packed
// columns by at least M threads and no unrolling (the tile kernel, 8-lane segments, 32-row warp
// tasks), only the triangle (stage_packed_columns); barrier() synchronises the kThreads threads, and the caller
// synchronises them again before reading Ls and Rs. issued() runs once the copies are issued,
// before waiting for them (the tile kernel loads its right-hand sides there).
template <typename T, int M, int kThreads, typename Layout = SegmentLayout<M, 1>, int kStageUnroll = 1,
          typename Barrier, typename Issued = NoCallback>
__device__ __forceinline__ void load_packed_triangle(T* Ls, T* Rs, int* exact, const T* L, const SolveProblem<T>& p,
                                                     int t, Barrier barrier, Issued issued = Issued()) {
  constexpr int kUnroll = M * M / kThreads < kLoadUnroll ? M * M / kThreads : kLoadUnroll;
  static_assert(kUnroll > 0, "load_packed_triangle: fewer elements than threads");
  static_assert(kThreads >= M || M % kThreads == 0, "load_packed_triangle: whole rows per thread");
  const int m = static_cast<int>(p.m);
  const bool k_fast = (p.l.col < 0 ? -p.l.col : p.l.col) <= (p.l.row < 0 ? -p.l.row : p.l.row);
  bool staged = false;
#if HSMA_ASYNC_COPY
  if constexpr (std::is_same_v<Layout, SegmentLayout<M, 1>> && kThreads >= M && kStageUnroll == 1) {
    if (p.async_copy) {
      stage_packed_columns<T, M, kThreads>(Ls, L, p, k_fast, t);
      staged = true;
    }
  } else if (p.async_copy) {
    // cp.async: thread t keeps its fast index f (or kFast of them when kThreads < M; consecutive
    // threads read consecutive addresses) and walks the slow index in steps of kSlowStep (threads
    // beyond kSlowStep * M idle), kStageUnroll steps unrolled: its source pointer steps by a
    // constant, and every copy is predicated (the padding is a zero fill; the diagonal's ones are
    // written with the pivots below), without branches. Unrolled (kernels whose registers are not
    // capped for occupancy: single solves), the slots' offsets are constants where f is the
    // column and the copies issue back to back.
    constexpr int kFast = kThreads < M ? M / kThreads : 1;
    constexpr int kSlowStep = kThreads < M ? 1 : kThreads / M;
    constexpr int kSlowIters = (M + kSlowStep - 1) / kSlowStep;
    const int64_t fast_stride = k_fast ? p.l.col : p.l.row, slow_stride = k_fast ? p.l.row : p.l.col;
    auto stage = [&](auto k_fast_c) {
      constexpr bool kKFast = decltype(k_fast_c)::value;
#pragma unroll
      for (int c = 0; c < kFast; ++c) {
        const int f = kThreads < M ? t + c * kThreads : t % M;
        const int sl0 = kThreads < M ? 0 : t / M;
        const bool mine = kThreads < M || t < kSlowStep * M;
        const T* src = L + f * fast_stride + sl0 * slow_stride;
#pragma unroll kStageUnroll
        for (int j = 0; j < kSlowIters; ++j, src += kSlowStep * slow_stride) {
          const int sl = sl0 + j * kSlowStep;
          const int i = kKFast ? sl : f, k = kKFast ? f : sl;
          const bool store = mine && sl < M && i >= k;  // (the upper triangle is not stored)
          const bool valid = i < m && k < m && (i > k || !p.unit);
          copy_async_or_zero(Ls + (store ? Layout::at(i, k) : 0), valid ? src : L, store, valid);
        }
      }
    };
    if (k_fast)
      stage(std::true_type());
    else
      stage(std::false_type());
    staged = true;
  }
#endif
  if (!staged) {
    const unsigned um = m;
    stage_triangle<T, kUnroll>(p.async_copy, t, M * M, kThreads, [&](unsigned e, T*& dst, T& fill) -> const T* {
      // (unsigned: shifts and masks where M is a power of two)
      const unsigned i = k_fast ? e / M : e % M, k = k_fast ? e % M : e / M;
      dst = i >= k ? Ls + Layout::at(i, k) : nullptr;
      fill = T(i == k ? 1 : 0);
      return i < um && k < um && (i > k || (i == k && !p.unit)) ? L + i * p.l.row + k * p.l.col : nullptr;
    });
  }
  issued();
  copy_async_wait_all();
  barrier();
  finish_pivots(Ls, p.conj ? Layout::kSize : 0, M, p, t, kThreads,
                [&](int k, T*& rcp_slot, int*& flag) -> const T* {
                  rcp_slot = Rs + k;
                  flag = exact;
                  T* diag = Ls + Layout::at(k, k);
                  if (p.unit || k >= m) *diag = T(1);  // (staged as a zero where k >= m; not staged where unit)
                  return diag;
                },
                barrier);
}

// Row of a column that lane `lane` of a kSeg-lane segment holds in its slot s: strided
// (lane + kSeg s) or blocked (kRows lane + s, kRows = M / kSeg).
template <int M, int kSeg, bool kBlocked> __device__ __forceinline__ int segment_row(int lane, int s) {
  return kBlocked ? lane * (M / kSeg) + s : lane + s * kSeg;
}

// Segment substitution of kCols columns over kSeg lanes: lane l owns rows l + kSeg * s
// (s < M / kSeg) of each column in b[c]. At step k the lane owning row k scales it by the pivot's
// reciprocal, a shuffle among the segment's lanes broadcasts x_k, and every lane updates its rows
// below k with L(:, k) from the packed triangle (each L(i, k) read once for the kCols columns). With one or two rows per lane (kSeg = 32: strided few-column solves) the
// reciprocals sit in registers, so no memory access is on the dependent chain; with more rows per
// lane (narrow segments, for batches) each step reads Rs[k], an address known in advance.
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
  // one loop over k (commit 5fcc99f), nvcc emitted different code and the 8-lane segments took
  // 342 instead of 308 us at batch 4096 of 64x64 complex64, 570 instead of 525 with 128 unit
  // columns, 375 instead of 342 at 48x48 complex128: probe_segments_..._2026-12-01.txt.)
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
// 64 rows, a single solve (one warp per scheduler, each instruction run once) waited mostly for
// its instructions to be fetched (Nsight Compute's "no instruction" stall: 52% of the samples at
// 64x64 complex64, 56% complex128); rolled, the code stays in the instruction cache, at the cost
// of run-time addresses and of loads no longer hoisted across iterations (see kBlockedSteps64).
// Tried and reverted (profile_cases_..._staging-chunks.csv): the lanes loading their pivots from L
// with B and computing the reciprocals while the triangle is staged (no finish_pivots and its
// barrier), and the triangle staged in four groups of columns, the substitution waiting for each
// before its steps: 64x64 kernel time 4.41 / 4.73 / 5.44 / 7.43 us (float32 / float64 / complex64 /
// complex128) with four groups and 4.29 / 4.48 / 5.01 / 6.77 with one, against 3.82 / 4.16 / 4.78 /
// 6.20 here; a first version, whose copies each computed their row, column and slot from scratch,
// took 6.5-10 us (cold instructions again).
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
template <typename T, int M, int kSeg, bool kBlocked, int kSteps = kSeg, int kCols>
__device__ __forceinline__ void solve_and_store_columns(T (&b)[kCols][M / kSeg], const T* Ls, const T* Rs, int lane,
                                                        bool exact, const SolveProblem<T>& p, T* X, int64_t j,
                                                        int64_t j_step, int64_t j_end) {
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
      if (jc < j_end && row < m) X[row * p.x.row + jc * p.x.col] = b[c][s];
    }
  }
}

// Blocks of the segment kernel that the register allocator must fit on one multiprocessor. For
// 8-lane segments (batches: occupancy matters) 4 of 256 threads (64 registers) for 8-byte types
// and 3 (80 registers, a few spilled) for complex128. Left to ptxas, batch 4096 of 64x64 complex64
// got 82 registers, so only 2 blocks fit (registers are allocated 8 per thread at a time): 383.7 us
// against 306.2 with 4 blocks; complex128 599.6 against 578.9 with 3 (4 spilled more and lost).
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
// shared memory, Nsight Compute's bound for the 8-lane segments (the L1 data pipe 85-89% busy at
// batch 4096 of 64x64), then serves kCols multiply-adds. Two columns at 2 blocks of 256 threads
// per multiprocessor (128 columns in flight, as one column at 4 blocks; 96 at 3) won for complex128 at 48
// rows (H200, batch 4096 of 48x48: 341.2 vs 357.3 us) and lost for complex64 at 64 rows (batch
// 4096 of 64x64: 334.8 vs 305.5 us; 128 unit columns 590.9 vs 522.7; A broadcast 328.8 vs
// 304.6; rolled to fit 80 registers, 3 blocks, 415-429 us: profile_cases_..._segment-columns.csv),
// where the launcher keeps one (launch_narrow_segments).
// The first pass's right-hand sides are loaded before the triangle, so both loads are in flight.
template <typename T, int M, int kSeg, bool kBlocked = false, int kThreads = kSmallThreads, int kSteps = kSeg,
          int kCols = 1>
__global__ void __launch_bounds__(kThreads, (segment_min_blocks<T, kSeg, kCols>()))
small_solve_segments_kernel(SolveProblem<T> p, int64_t tile_cols, int64_t ntiles) {
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
    const T* B = p.B + off[1];
    T* X = p.X + off[2];
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
          b[c][s] = (jc < j_end && row < m) ? B[row * p.b.row + jc * p.b.col] : T(0);  // alpha: at the solve
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
// no lane idles while one column is solved.
constexpr int kWarpTaskThreads = 128;
template <typename T, int M> constexpr bool warp_tasks_fit() {
  return (kWarpTaskThreads / kSegment) * (M * (M + 1) / 2 + M) * sizeof(T) <= 46 * 1024;
}

template <typename T, int M>
__global__ void __launch_bounds__(kWarpTaskThreads)
small_solve_warp_tasks_kernel(SolveProblem<T> p) {
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
    const T* B = p.B + off[1];
    T* X = p.X + off[2];
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
        b[0][s] = row < m ? p.alpha * B[row * p.b.row + j * p.b.col] : T(0);
      }
      solve_and_store_columns<T, M, kSegment, false>(b, Ls, Rs, lane, exact_task, p, X, j, 1, p.n);
    }
  }
}

template <typename T, int M>
hsmaError_t launch_warp_tasks(const SolveProblem<T>& p, const DeviceInfo& dev, hsmaStream_t stream) {
  constexpr int kWarps = kWarpTaskThreads / kSegment;
  const int64_t blocks = (p.batch + kWarps - 1) / kWarps;
  const unsigned grid = small_grid(p, blocks);
  return launch_small(small_solve_warp_tasks_kernel<T, M>, grid, kWarpTaskThreads, 0, stream, p, dev, true);
}

template <typename T, int M, int kSeg, bool kBlocked = false, int kThreads = kSmallThreads, int kSteps = kSeg,
          int kCols = 1>
hsmaError_t launch_segments(const SolveProblem<T>& p, const DeviceInfo& dev, hsmaStream_t stream) {
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
  return launch_small(small_solve_segments_kernel<T, M, kSeg, kBlocked, kThreads, kSteps, kCols>, grid, kThreads, 0,
                      stream, p, dev, true, tile_cols, ntiles);
}

// Tile kernel (batches of many columns at 33-64 rows): a right-looking substitution whose rows and
// columns are spread over a warp's lanes in register tiles, so that each L(i, k) read from shared
// memory feeds several multiply-adds (the 8-lane segment kernel reads one per multiply-add and is
// bound by the L1 data pipe) and no lane idles while a row is solved.
//   - A thread block takes one (batch entry, column tile) task at a time (grid-stride loop); the
//     whole block loads the triangle, packed by columns and padded to 64 rows, as the strided
//     segment kernel does (SegmentLayout<64, 1>); then its warps solve their columns
//     independently, synchronising only within the warp.
//   - Each 32-lane warp owns tile_warp_cols() columns of the tile and all 64 rows: lane
//     (g, c) = (lane / 8, lane % 8) holds rows g + 4 s, s < 16 (its "slots"), of tile_lane_cols()
//     columns (2; complex128 1) from tile_lane_cols() c on, in registers. The four lanes of a
//     column group reading L(g + 4 s, k) read consecutive words (no bank conflicts; the eight column groups'
//     reads of one word are a broadcast), and each read feeds tile_lane_cols() multiply-adds.
//   - Step k (rows in order): every lane scales its row of slot k / 4 by that row's pivot
//     reciprocal (the lanes of row group k % 4 hold row k, final by now; the others' products are
//     thrown away), a shuffle from lane (k % 4, c) broadcasts x_k to its column group, and every
//     lane subtracts L(i, k) x_k from its rows i > k. A row's slot is scaled and stored once its
//     row group's step is past. So each x_i subtracts L(i, k) x_k for k in increasing order, as in
//     the other kernels, and the value stored is the one broadcast.
// The four steps of a slot are a loop of kSteps steps per iteration: one for 8-byte types, four
// (the slot unrolled) for complex128, whose lanes hold one column, so a step is half the code
// (complex64 with the slots unrolled took 344 us against 219 with one step per iteration, see
// launch_tiles_as; that this is the instruction cache is a guess, not profiled).
// Registers: at most 128 per thread (4 blocks of 128 threads per multiprocessor). Tasks whose
// pivots need a division leave the tiles (substitute_column_exact): with the division inlined
// in the substitution, ptxas (CUDA 13.0, sm_90) spilled 68 bytes per thread for complex64 and
// 156 for complex128 at four steps, and kept one register pair for all of a step's shared-memory
// reads in the first four slots, each read waited on by its multiply-adds; without it, complex64
// takes 125 registers without spills and keeps about 6 reads in flight (complex128 at four steps:
// 128 registers, 32 bytes spilled). H200, batch 4096 of 64x64, kernel time: complex64 204 against
// 219 us, complex128 321 against 340 (profile_cases_..._exact-split.csv, _tiles-final.csv). Since
// the staging of stage_packed_columns and the stepped B and X pointers (33f5a4c): complex64 124
// registers, no spills; complex128 at four steps 92 bytes spilled, in the per-task code. With B's
// offsets computed again (4440f95): complex64 128 registers, no spills; complex128 16 bytes.
constexpr int kTileM = 64;        // the padded order
constexpr int kTileRowLanes = 4;  // lanes along a column: lane (g, c) holds rows g + 4 s
constexpr int kTileColLanes = 8;  // column groups of a warp
constexpr int kTileMaxWarps = 8;
template <typename T> __host__ __device__ constexpr int tile_lane_cols() { return sizeof(T) >= 16 ? 1 : 2; }  // columns per lane
template <typename T> __host__ __device__ constexpr int tile_warp_cols() { return kTileColLanes * tile_lane_cols<T>(); }
// Blocks per multiprocessor that the register allocator must fit: 128 registers per thread.
template <int kThreads> __host__ __device__ constexpr int tile_min_blocks() { return 65536 / (128 * kThreads); }

// The substitution of a warp's tile (see above): x[s][cc] holds row g + 4 s of the lane's column
// cc on entry (scaled by alpha), solved on exit; store(s) writes slot s's rows once they are final.
// kSteps steps per loop iteration (1, 2 or 4: a slot's steps unrolled, so that the next step's
// scaling and shuffle can be issued among this step's updates).
template <typename T, bool kUnit, int kSteps, typename Store>
__device__ __forceinline__ void substitute_tile(T (&x)[kTileM / kTileRowLanes][tile_lane_cols<T>()], const T* Ls,
                                                const T* Rs, int g, int c, Store store) {
  constexpr int kSlots = kTileM / kTileRowLanes, kCols = tile_lane_cols<T>();
  static_assert(kTileRowLanes % kSteps == 0, "substitute_tile: whole loop iterations");
#pragma unroll
  for (int s0 = 0; s0 < kSlots; ++s0) {
    const int own = kTileRowLanes * s0 + g;  // my row in this slot
    const T rcp = kUnit ? T(1) : Rs[own];
    auto scaled = [&](T v) -> T { return kUnit ? v : v * rcp; };
    // Ls[col + 4 s] = L(g + 4 s, k) at step k (32-bit offsets, one add per step).
    int col = packed_start<kTileM>(kTileRowLanes * s0) - kTileRowLanes * s0 + g;
#pragma unroll 1
    for (int q0 = 0; q0 < kTileRowLanes; q0 += kSteps) {
#pragma unroll
      for (int u = 0; u < kSteps; ++u) {
        const int q = q0 + u, k = kTileRowLanes * s0 + q;
        T xk[kCols];
#pragma unroll
        for (int cc = 0; cc < kCols; ++cc) xk[cc] = shfl(scaled(x[s0][cc]), q * kTileColLanes + c, 32);
        const T* L = Ls + col;
        {  // my row of this slot, unless it is at or above row k (then done: the update is dropped)
          const T l = L[kTileRowLanes * s0];
#pragma unroll
          for (int cc = 0; cc < kCols; ++cc) {
            const T v = fms(x[s0][cc], l, xk[cc]);
            x[s0][cc] = g > q ? v : x[s0][cc];
          }
        }
#pragma unroll
        for (int s = s0 + 1; s < kSlots; ++s) {
          const T l = L[kTileRowLanes * s];
#pragma unroll
          for (int cc = 0; cc < kCols; ++cc) x[s][cc] = fms(x[s][cc], l, xk[cc]);
        }
        col += kTileM - k - 1;
      }
    }
#pragma unroll
    for (int cc = 0; cc < kCols; ++cc) x[s0][cc] = scaled(x[s0][cc]);
    store(s0);
  }
}

// The tile kernel's tasks whose pivots need a division (a reciprocal not usable, see
// finish_pivots; never with a unit diagonal): the warp's lanes store alpha B to X, and then each of
// its first tile_warp_cols() lanes solves one column alone, in place in X (its own rows only, so
// no lane waits on another), in the register tiles' order: x_i subtracts L(i, k) x_k for k in
// increasing order, then is divided by its pivot (or multiplied by the reciprocal where usable).
// Slow (a serial column per lane, through the L1 cache), but it keeps the divisions' code and
// registers out of the register-tiled substitution: with them inlined there, ptxas capped at
// 128 registers reused one register pair for all shared-memory reads of a step and spilled.
template <typename T, typename Layout>
__device__ __noinline__ void substitute_column_exact(T* X, int64_t xrow, int m, const T* Ls, const T* Rs) {
#pragma unroll 1
  for (int i = 0; i < m; ++i) {
    T v = X[i * xrow];
#pragma unroll 4
    for (int k = 0; k < i; ++k) v = fms(v, Ls[Layout::at(i, k)], X[k * xrow]);
    X[i * xrow] = divide_by_pivot(v, Ls[Layout::at(i, i)], Rs[i]);
  }
}

template <typename T, int kThreads, int kSteps>
__global__ void __launch_bounds__(kThreads, tile_min_blocks<kThreads>())
small_solve_tiles_kernel(SolveProblem<T> p, int64_t ntiles) {
  constexpr int M = kTileM;
  constexpr int kSlots = M / kTileRowLanes, kCols = tile_lane_cols<T>();
  constexpr int kWarps = kThreads / 32;
  static_assert(kWarps <= kTileMaxWarps && kTileRowLanes * kTileColLanes == 32, "small_solve_tiles_kernel: layout");
  __shared__ T Ls[SegmentLayout<M, 1>::kSize];
  __shared__ T Rs[M];
  __shared__ int exact;
  const int tid = static_cast<int>(threadIdx.x);
  const int w = tid / 32, lane = tid % 32, g = lane / kTileColLanes, c = lane % kTileColLanes;
  const int m = static_cast<int>(p.m);
  const int64_t ntasks = p.batch * ntiles;
  grid_dependency_sync(p.dependent_launch == 1);

  for (int64_t task = blockIdx.x; task < ntasks; task += gridDim.x) {
    int64_t bidx, tile, off[3];
    task_coords(task, ntiles, bidx, tile);
    batch_offsets(p.bl, bidx, off);
    const int64_t jl = (tile * kWarps + w) * tile_warp_cols<T>() + c * kCols;  // the lane's first column
    bool col_ok[kCols];
#pragma unroll
    for (int cc = 0; cc < kCols; ++cc) col_ok[cc] = jl + cc < p.n;
    // The lane's rows g + 4 s of B, each slot's offset computed (about 16 instructions per load,
    // nvcc sm_90 SASS), and of X by a pointer stepped 4 rows at a time. B through a stepped pointer
    // as well took fewer instructions but longer (H200, kernel time of the tile kernel alone,
    // batch 4096 of 64x64, scripts/small_kernel_probe.cu: complex64 165.9 against 162.7 us,
    // complex128 318.8 against 302.2; probe_tiles_nvidia-h200_2026-12-02.txt).
    T x[kSlots][kCols];
    auto load_rhs = [&] {
      const T* B = p.B + off[1];
#pragma unroll
      for (int s = 0; s < kSlots; ++s)
#pragma unroll
        for (int cc = 0; cc < kCols; ++cc) {  // alpha: below
          const int row = kTileRowLanes * s + g;
          x[s][cc] = (row < m && jl + cc < p.n) ? B[row * p.b.row + (jl + cc) * p.b.col] : T(0);
        }
    };
    __syncthreads();  // the previous task is done with Ls and exact
    if (tid == 0) exact = 0;  // (seen by finish_pivots after load_packed_triangle's barrier)
    // B is loaded once the triangle's copies are issued (both kinds of load in flight together;
    // B's registers not live while the copies are issued). No barrier after clearing the flag:
    // load_packed_triangle's barrier before finish_pivots orders it.
    load_packed_triangle<T, M, kThreads>(Ls, Rs, &exact, p.L + off[0], p, tid, [] { __syncthreads(); }, load_rhs);
    __syncthreads();
    const bool exact_task = exact != 0;
#pragma unroll
    for (int s = 0; s < kSlots; ++s)
#pragma unroll
      for (int cc = 0; cc < kCols; ++cc) x[s][cc] = p.alpha * x[s][cc];
    T* X = p.X + off[2];
    const int64_t xrow = p.x.row, xcol = p.x.col;
    T* Xl = X + g * xrow + jl * xcol;
    const int64_t xrows = kTileRowLanes * xrow;
    auto store = [&](int s) {  // (called for s = 0, 1, ... in order: Xl steps to the next slot's row)
#pragma unroll
      for (int cc = 0; cc < kCols; ++cc)
        if (kTileRowLanes * s + g < m && col_ok[cc]) Xl[cc * xcol] = x[s][cc];
      Xl += xrows;
    };
    if (exact_task) {  // (never with a unit diagonal) out of the register tiles, see substitute_column_exact
#pragma unroll
      for (int s = 0; s < kSlots; ++s) store(s);
      warp_sync();  // the warp's columns of alpha B are in X
      const int64_t j = (tile * kWarps + w) * tile_warp_cols<T>() + lane;
      if (lane < tile_warp_cols<T>() && j < p.n)
        substitute_column_exact<T, SegmentLayout<M, 1>>(X + j * xcol, xrow, m, Ls, Rs);
    } else if (p.unit)
      substitute_tile<T, true, kSteps>(x, Ls, Rs, g, c, store);
    else
      substitute_tile<T, false, kSteps>(x, Ls, Rs, g, c, store);
  }
}

// Four warps for B of at most 4 tile_warp_cols columns, else eight. Steps per loop iteration of
// the substitution: where the tile kernel is forced, p.segment_steps (HSMA_TRSM_SEGMENT_STEPS) if
// it is 1, 2 or 4; else tile_steps: one for 8-byte types, four for complex128 (H200, kernel time, batch 4096 of 64x64
// with 64 columns / 128 unit columns / A broadcast: complex64 219 / 362 / 215 us for one step, 229
// / 372 / 220 for two, 344 / 487 / 237 for four; complex128 424 / 769 / 448, 376 / 690 / 434, 347 /
// 639 / 350: profile_cases_..._tiles-steps.csv; the other types were not measured).
template <typename T> constexpr int tile_steps() { return sizeof(T) >= 16 ? 4 : 1; }
template <typename T, int kThreads>
hsmaError_t launch_tiles_as(const SolveProblem<T>& p, const DeviceInfo& dev, hsmaStream_t stream, int64_t ntiles) {
  const int64_t ntasks = p.batch * ntiles;
  const unsigned grid = small_grid(p, ntasks);
  const bool forced = p.kernel == SmallKernel::kTiles &&
                      (p.segment_steps == 1 || p.segment_steps == 2 || p.segment_steps == 4);
  const int steps = forced ? p.segment_steps : tile_steps<T>();
  if (steps == 1)
    return launch_small(small_solve_tiles_kernel<T, kThreads, 1>, grid, kThreads, 0, stream, p, dev, true, ntiles);
  if (steps == 4)
    return launch_small(small_solve_tiles_kernel<T, kThreads, 4>, grid, kThreads, 0, stream, p, dev, true, ntiles);
  return launch_small(small_solve_tiles_kernel<T, kThreads, 2>, grid, kThreads, 0, stream, p, dev, true, ntiles);
}
template <typename T>
hsmaError_t launch_tiles(const SolveProblem<T>& p, const DeviceInfo& dev, hsmaStream_t stream) {
  constexpr int kWide = 32 * kTileMaxWarps, kNarrow = kWide / 2;
  const int threads = p.n <= (kNarrow / 32) * tile_warp_cols<T>() ? kNarrow : kWide;
  const int64_t tile_cols = (threads / 32) * tile_warp_cols<T>();
  const int64_t ntiles = (p.n + tile_cols - 1) / tile_cols;
  if (threads == kNarrow) return launch_tiles_as<T, kNarrow>(p, dev, stream, ntiles);
  return launch_tiles_as<T, kWide>(p, dev, stream, ntiles);
}

// Tensor-core kernel (float64 and complex128 solves of many columns, sm_80+): a blocked
// right-looking substitution over 8-row blocks whose updates run on the FP64 tensor cores
// (mma.sync m8n8k4; on sm_90 two row blocks per m16n8k4 product, dmma_rows), so that an element
// of L read from shared memory serves 8 columns at once.
// The 8-lane segment kernel reads one element per column and multiply-add: at batch 4096 of 64x64
// its L1 data pipe was 85% (complex64) and 89% (complex128) busy (H200, Nsight Compute).
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
//     block inverts A's diagonal blocks and
//     replaces each block below by W(rb, kb) = L(rb, kb) L(kb, kb)^-1 once (mma_fold_inverses),
//     and reuses them for all its later tasks, whose solve is then products only:
//     X(kb) = L(kb, kb)^-1 r(kb), acc(rb) -= W(rb, kb) r(kb) (mma_solve_blocks). Multiplying by
//     inverses is the blocked TRSM of the large path (the paper's, LAPACK-style inverted diagonal
//     blocks): not a substitution's rounding, within its error bound for these 8x8 blocks. Tasks
//     whose pivots need a true division, whose B holds inf or nan, or whose inverses or W would
//     not be finite substitute instead (with L staged again), so that IEEE special values spread
//     as in the other kernels. On the H200 (batch 4096 of 64x64, A broadcast) it took complex128
//     from 412 to 240 us and float64 from 130 (column kernel) to 103 us. With A batched the
//     launcher folds where a matrix has several column tiles, each block taking a contiguous
//     range of tasks so that one fold serves all tiles of a matrix (complex128 batch 4096 of
//     64x64, two tiles: 380 vs 421 us; linear attention, 128 unit columns: 595 vs 764 us); with
//     one fold per task it lost (complex128 451 vs 421 us, float64 153 vs 133:
//     profile_cases_..._mma-inverse.csv), so one tile per matrix keeps the substitution.
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
// runs at twice m8n8k4's rate: 66 against 33 TFLOP/s, the FP64 vector rate (8 independent
// products per warp, 4 and 8 warps per block (the 16-warp launch of m16n8k4 failed; m8n8k4 33 at
// 16 too), two blocks per multiprocessor; m16n8k8 and m16n8k16 66 as well, at 4-16 warps).
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
// at 64 rows (a cap of 170 registers, 164-168 used; H200, batch 4096 of 64x64, kernel alone:
// 283-285 us against 345-348 capped for 2 blocks and 371-374 for 4, which spills;
// probe_mma_..._prefetch.txt).
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
// The blocks below are updated two at a time (dmma_rows; H200, batch 4096 of 64x64 complex128,
// kernel time in scripts/small_kernel_probe.cu: folding 284-285 us against 381-382 one at a time,
// 128 unit columns 448-452 against 598-601, A broadcast 193 against 241-244, substituting 413-415
// against 421-422). Pairing X(kb) with acc(kb + 1) too took 289-291 us (A broadcast 187); pairing
// the fold's W too (mma_fold_inverses), 168 registers with 208 bytes spilled and 359 us.
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
  // grid-stride (with one A for all tasks it was faster: H200, A broadcast, 239 vs 251 us).
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
      mma_solve_blocks<T, M, false, true, false>(acc, Ls, Rs, lane, p, X, jl);  // (unit: its pivots and reciprocals are 1)
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

// The tensor-core kernel runs where the GPU has FP64 mma.sync (sm_80+; not built for AMD).
inline bool mma_supported(const DeviceInfo& dev) { return !HSMA_HIP && dev.cc_major >= 8; }
// Whether its code on this GPU pairs the row blocks' products (dmma_rows: m16n8k4, compiled where
// the code is for a virtual architecture of 9.0 or newer, which kernels_wait asks).
inline bool mma_pairs(const DeviceInfo& dev) { return mma_supported(dev) && dev.cc_major >= 9 && kernels_wait(dev); }

// Four warps (32 columns per task) for B of at most 32 columns, for complex128 at 64 rows (H200,
// batches of 4096 64x64: 421 vs 444 us, 128 unit columns 764 vs 874, A broadcast 240 vs 284:
// 161-168 registers and 3 blocks per multiprocessor against 128 with spills and 2) and for A
// broadcast over a batch (float64 batch 4096 of 64x64: 103 vs 108 us), else eight (64 columns
// per task; float64 64x4096: 7.8 vs 9.6 us), unless forced (p.mma_warps). Where one A serves every
// task (shares_a), or a matrix has several column tiles (unless p.mma_fold = 0), or where forced
// (p.mma_fold = 1: also one tile per matrix, each task folding its own A), the folding kernel
// runs on a grid of the blocks that fit at once, so that each block inverts and folds an A once
// for all its tasks of that A.
template <typename T, int M>
hsmaError_t launch_mma(const SolveProblem<T>& p, const DeviceInfo& dev, hsmaStream_t stream) {
  constexpr int kWide = 8, kNarrow = 4;
  const bool a_shared = shares_a(p);
  const bool narrow = p.n <= kNarrow * 8 || (sizeof(T) >= 16 && M == 64) || (a_shared && p.batch > 1);
  const int warps = p.mma_warps ? p.mma_warps : narrow ? kNarrow : kWide;
  const int64_t tile_cols = warps * 8;
  const int64_t ntiles = (p.n + tile_cols - 1) / tile_cols;
  const int64_t ntasks = p.batch * ntiles;
  const bool fold = a_shared || p.mma_fold == 1 || (ntiles > 1 && p.mma_fold != 0);
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

// Lanes per column of the segment kernel for complex batches (H200, scripts/profile_cases.py,
// batches of 32x32 and 64x64: 8 lanes beat 2, 4 and 32 lanes and the column kernel).
constexpr int kNarrowSegment = 8;
// Measured on the H200 only. On AMD (64-wide wavefronts; clang does not fully unroll the complex
// 8-lane substitution, so its rows would leave registers) the launcher keeps the choices it had
// before them: the column kernel where it fits, else warp-wide segments.
#if HSMA_HIP
constexpr bool kNarrowSegments = false;
#else
constexpr bool kNarrowSegments = true;
#endif

// Threads per block of the blocked segment kernel (few-column solves: a few columns per block, so
// that the blocks spread over more multiprocessors and a scheduler issues for one warp).
constexpr int kBlockedThreads = 128;

// Rows per lane of warp-wide segments unless forced (HSMA_TRSM_SEGMENT_ROWS): 2 contiguous rows
// (the blocked substitution, M / 2 lanes per column). On the H200 (scripts/profile_cases.py,
// single solves, kernel time) it beat strided rows at every order and dtype measured, e.g. at
// m = n = 64 float32 3.87 vs 5.14 us, float64 4.17 vs 5.90, complex64 4.91 vs 6.32, complex128
// 6.87 vs 8.33; 4 rows per lane (16 lanes) lost to 2 (4.16 / 5.07 / 6.34 / 9.35). Not measured on
// AMD, which keeps strided rows. Besides single solves this covers the other few-column cases the
// launcher gives warp-wide segments (batch * n <= kFewColumns; batches of one or two 8- or 16-byte
// columns below the warp-task threshold), timed there only through the test suite's runs.
constexpr int kBlockedRows = HSMA_HIP ? 1 : 2;

// Steps per loop iteration of the blocked substitution (substitute_segment_blocked) at M = 64,
// unless forced (HSMA_TRSM_SEGMENT_STEPS); at M = 32 (16 steps) it stays fully unrolled. On the
// H200 (scripts/profile_cases.py, single solves, kernel time, fully unrolled / 4 / 2 / 1 steps):
// 64x64 complex128 6.70 / 6.20 / 6.27 / 6.90 us, complex64 4.89 / 4.78 / 5.00 / 5.59, float64
// 4.16 / 4.16 / 4.27 / 4.70, float32 3.84 / 3.82 / 4.06 / 4.69; 48x64 complex128 6.26 / 5.82,
// complex64 4.88 / 4.67; 64x1 complex64 4.32 / 4.40 (the one loss at 64 rows); at 32 rows 4 steps
// lost for every dtype (float32 2.53 / 2.74, complex64 3.23 / 3.35).
constexpr int kBlockedSteps64 = 4;

// 8-lane segments: two columns per segment for complex128 at 33-48 rows, one elsewhere (see
// small_solve_segments_kernel).
template <typename T, int M>
hsmaError_t launch_narrow_segments(const SolveProblem<T>& p, const DeviceInfo& dev, hsmaStream_t stream) {
  constexpr int kCols = std::is_same_v<T, complex<double>> && M == 48 ? 2 : 1;
  return launch_segments<T, M, kNarrowSegment, false, kSmallThreads, kNarrowSegment, kCols>(p, dev, stream);
}

// The segment kernel with `lanes` lanes per column; warp-wide segments (lanes = 32) run blocked
// with `rows` = 2 contiguous rows per lane (M / 2 lanes per column), `steps` steps per loop
// iteration of the substitution (0: kBlockedSteps64 at M = 64, unrolled at 32), else strided.
template <typename T, int M>
hsmaError_t launch_segments(const SolveProblem<T>& p, const DeviceInfo& dev, hsmaStream_t stream, int lanes,
                            int rows, int steps) {
  if constexpr (kNarrowSegments) {
    if (lanes == kNarrowSegment) return launch_narrow_segments<T, M>(p, dev, stream);
  }
  if (lanes == kSegment && rows == 2) {
    constexpr int kSeg = M / 2;
    switch (steps ? steps : M == 64 ? kBlockedSteps64 : kSeg) {
      case 1: return launch_segments<T, M, kSeg, true, kBlockedThreads, 1>(p, dev, stream);
      case 2: return launch_segments<T, M, kSeg, true, kBlockedThreads, 2>(p, dev, stream);
      case 4: return launch_segments<T, M, kSeg, true, kBlockedThreads, 4>(p, dev, stream);
      default: return launch_segments<T, M, kSeg, true, kBlockedThreads, kSeg>(p, dev, stream);
    }
  }
  return launch_segments<T, M, kSegment>(p, dev, stream);
}

}  // namespace

template <typename T>
hsmaError_t launch_small_solve(const SolveProblem<T>& p, hsmaStream_t stream) {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return hsmaSuccess;
  if (p.m > kSmallMaxM) return hsmaError_t(1);
  const DeviceInfo dev = current_device_info();
  if constexpr (std::is_same_v<T, complex<double>>) {
    // The paper's seven-stage pipeline for complex128 at m = 64, on request (ablations): on the
    // H200 the segment kernel was faster, single and batched (benchmarks/results, small suite).
    if (p.kernel == SmallKernel::kPipeline) return launch_small_pipeline(p, stream);
  }
  // The segment kernel spreads each column's substitution over a segment's lanes, the column
  // kernel runs it on one thread. Warp-wide segments win (H200, scripts/profile_cases.py) for a
  // few columns of a triangle beyond 16 rows (a single solve) and for batches of single vectors in
  // 8- and 16-byte types; 8-lane segments for complex solves with more columns in all
  // (batch * n > kFewColumns: batches, or one wide B) of orders beyond 48 (complex64) or 32
  // (complex128), where a column fills too many of one thread's registers (at 17-32 rows the
  // column kernel, with its triangles staged by cp.async, won: batch 10000 of 32x32 complex64
  // 105 vs 155 us, complex128 162 vs 276; at 48 rows, batch 4096 of 48x48 complex64 147 vs 192
  // us against 8-lane segments of 48 rows, complex128 818 (split columns) vs 350). Large complex
  // batches take the tile kernel or the tensor-core kernel instead where they won (below).
  // Without 8-lane segments (AMD), complex64 beyond 48 rows takes warp-wide segments unless a
  // batch has more than 64 columns per matrix.
  constexpr bool kComplex = std::is_same_v<T, complex<float>> || std::is_same_v<T, complex<double>>;
  constexpr bool kComplex64 = std::is_same_v<T, complex<float>>;
  const bool few_columns =
      p.m > 16 && (p.batch * p.n <= kFewColumns || (p.n <= 2 && sizeof(T) >= 8) ||
                   (!kNarrowSegments && kComplex64 && p.m > 48 && (p.n <= 64 || p.batch == 1)));
  const bool narrow_segments = kNarrowSegments && !few_columns && kComplex && p.m > (kComplex64 ? 48 : 32);
  // Large batches of a few columns each: one matrix per warp (the warp-task segment kernel), except
  // float32 batches beyond kFewColumns columns in all, which the column kernel takes (it won there:
  // batch 10000 of 32x32, n = 1, 26 vs 37 us on the H200).
  const bool warp_tasks_wanted = p.kernel == SmallKernel::kWarpTasks ||
                                 (p.kernel == SmallKernel::kAuto && p.m > 16 &&
                                  (sizeof(T) >= 8 || p.batch * p.n <= kFewColumns) &&
                                  p.n <= kWarpTaskMaxColumns &&
                                  p.batch >= int64_t(kWarpTaskMinBatchPerSM) * dev.multiprocessors);
  // The tile kernel at 33-64 rows when forced (HSMA_TRSM_SMALL_KERNEL=tiles); unforced, for large
  // complex batches (at least 4 matrices per multiprocessor): complex64 of 49-64 rows with 64
  // columns or more per matrix; complex128 of 33-64 rows with A batched and 48-128 columns per
  // matrix, and of 49-64 rows with 48 or more columns, wherever the tensor-core kernel is not
  // taken (below: before sm_80, with HSMA_TRSM_COLUMN_ROWS set, and for A batched with 48-128
  // columns per matrix where its products do not go in pairs: mma_pairs). H200, batch 4096, kernel
  // time (profile_cases_..._exact-split.csv): complex64 at 64x64 204 us against 332 for the 8-lane
  // segment kernel, 128 unit columns 352 vs 566, A broadcast 199 vs 330; not at 48 rows, where the
  // column kernel won (143 vs 195 us); complex128 at 48x48 306 against 356 for the 8-lane segments
  // of 48 rows. Both kernels pad (the tile kernel to 64 rows, the segments to 48), so their times
  // are taken to be flat over 33-48 rows, where only 48 was measured; widths of 48-63 columns were
  // measured at 48 rows only. Kept off AMD, where it was not measured.
  const bool tiles_wanted = p.kernel == SmallKernel::kTiles ||
                            (p.kernel == SmallKernel::kAuto && !HSMA_HIP && kComplex &&
                             (kComplex64 ? p.m > 48 && p.n >= 64
                                         : p.m > 32 && p.n >= 48 && (p.m > 48 || (p.n <= 128 && !shares_a(p)))) &&
                             p.segment_lanes == 0 &&
                             p.batch >= int64_t(kWarpTaskMinBatchPerSM) * dev.multiprocessors);
  if constexpr (!HSMA_HIP && (std::is_same_v<T, double> || std::is_same_v<T, complex<double>>)) {
    // The tensor-core kernel where forced (HSMA_TRSM_SMALL_KERNEL=mma); for complex128 solves of
    // 49-64 rows with many columns in all (batches; one wide B), and of 33-48 rows where the tile
    // kernel would be taken (large batches, A batched, 48-128 columns per matrix; the tensor-core
    // kernel pads them to 64 rows), where its row-block products go in pairs (mma_pairs; without
    // them the tile kernel keeps those batches, as it did on the H200 before 8c7e52d: 64x64 321
    // against 380 us, 48x48 306 vs 346, 128 unit columns 572 vs 592, profile_cases_..._exact-split.csv);
    // for float64 ones of 49-64 rows with one A for every task and
    // 64 columns or more per matrix (shares_a). H200, batch 4096, kernel time of each kernel
    // forced (scripts/small_kernel_probe.cu, probe_mma_nvidia-h200_2026-12-02.txt): complex128
    // 64x64 284 us against 303 for the tile kernel, 128 unit columns 449 vs 540, 48 columns 275
    // vs 299, 56x56 280 vs 297, 48x48 268-270 vs 287, A broadcast 193-194 vs 300; float64 A
    // broadcast 105-107 us (the column kernel took 130 in an earlier profile); a single 64x4096
    // float64 solve 7.8 vs 10.7 us (earlier; narrower B were not measured). Not for float64 with A
    // batched (64x64 149-150 us folding, 171 substituting, against 122-123 for the column kernel;
    // 128 unit columns 240 vs 213) or complex128 at 32 rows (196 vs 130 us, earlier).
    const bool tiles_first = tiles_wanted && p.n <= 128 && !shares_a(p) && !mma_pairs(dev);  // (complex128)
    const bool mma_wanted = p.kernel == SmallKernel::kMma ||
                            (p.kernel == SmallKernel::kAuto && !few_columns && p.segment_lanes == 0 &&
                             p.column_rows == 0 &&
                             (std::is_same_v<T, complex<double>>
                                  ? !tiles_first && (p.m > 48 || (tiles_wanted && p.m > 32))
                                  : p.m > 48 && p.n >= 64 && shares_a(p)));
    if (mma_wanted && mma_supported(dev)) {
      if (p.m <= 32) return launch_mma<T, 32>(p, dev, stream);
      return launch_mma<T, 64>(p, dev, stream);
    }
  }
  if (tiles_wanted && p.m > 32) return launch_tiles<T>(p, dev, stream);
  if (warp_tasks_wanted) {
    if (p.m <= 32) {
      if constexpr (warp_tasks_fit<T, 32>()) return launch_warp_tasks<T, 32>(p, dev, stream);
    } else {
      if constexpr (warp_tasks_fit<T, 64>()) return launch_warp_tasks<T, 64>(p, dev, stream);
    }
  }
  if (p.kernel == SmallKernel::kColumns ||
      (p.kernel != SmallKernel::kSegments && !few_columns && !narrow_segments && p.segment_lanes == 0)) {
    if (p.m <= 8) return launch_columns<T, 8>(p, dev, stream);
    if (p.m <= 16) return launch_columns<T, 16>(p, dev, stream);
    if (p.m <= 32) {
      // 17-32 rows of a complex type, 16 at a time (the split kernel), when asked for
      // (HSMA_TRSM_COLUMN_ROWS=16) or for complex64 batches of at least 4 matrices per
      // multiprocessor: 93 registers instead of 123 let 5 blocks of 128 threads run per
      // multiprocessor instead of 4 (H200, batch 10000 of 32x32: complex64 73.9 vs 77.9 us;
      // complex128, 142 vs 244 registers, 131.9 vs 130.6 us, keeps whole columns;
      // profile_cases_..._column-rows16.csv). Kept off AMD, where it was not measured.
      if constexpr (kComplex) {
        const bool split16 = p.column_rows == 16 ||
                             (!HSMA_HIP && kComplex64 && p.column_rows == 0 &&
                              p.batch >= int64_t(kWarpTaskMinBatchPerSM) * dev.multiprocessors);
        if (split16) return launch_columns<T, 32, 16>(p, dev, stream);
      }
      return launch_columns<T, 32>(p, dev, stream);
    }
    // 33-64 rows: whole columns in registers where they fit (real types, complex64), unless the
    // split kernel, which holds 32 rows at a time, is asked for (HSMA_TRSM_COLUMN_ROWS=32:
    // p.column_rows) or measured better on the H200 (kept off AMD, where it was not measured):
    // float64 at 49-64 rows (batch 4096 of 64x64, 132.7 vs 140.2 us) and float32 there since its
    // split kernel needs 114 registers, not 142 (batch 4096 of 64x64 69.6 vs 77.9 us, 128 unit
    // columns 119.2 vs 129.5; profile_cases_..._split-float32.csv). Complex128, whose column does
    // not fit, takes the split kernel only when the column kernel is forced; else the segment kernel.
    const bool split = (p.column_rows != 0 && p.column_rows <= 32) ||
                       (!HSMA_HIP && p.column_rows == 0 && p.m > 48 &&
                        (std::is_same_v<T, double> || std::is_same_v<T, float>));
    if (!split) {
      if constexpr (48 * sizeof(T) <= kColumnMaxBytes) {
        if (p.m <= 48) return launch_columns<T, 48>(p, dev, stream);
      }
      if constexpr (64 * sizeof(T) <= kColumnMaxBytes) {
        if (p.m <= 64) return launch_columns<T, 64>(p, dev, stream);
      }
    }
    if (split || p.kernel == SmallKernel::kColumns) return launch_columns<T, 64, 32>(p, dev, stream);
  }
  // HSMA_TRSM_SEGMENT_LANES (p.segment_lanes) forces the segment kernel with that many lanes per
  // column (8 runs as 32 where 8-lane segments are not built: AMD).
  const int lanes = p.segment_lanes ? p.segment_lanes
                                    : narrow_segments && p.kernel != SmallKernel::kSegments ? kNarrowSegment : kSegment;
  const int rows = p.segment_rows ? p.segment_rows : kBlockedRows;  // (warp-wide segments only)
  const int steps = p.segment_steps;
  if (p.m <= 32) return launch_segments<T, 32>(p, dev, stream, lanes, rows, steps);
  // 33-48 rows with 8-lane segments (complex128 batches, or forced): 6 rows per lane (padding to
  // 64 would do 1.8x the work: batch 4096 of 48x48 complex128 515 us padded, 350 at 48 rows).
  if constexpr (kNarrowSegments && kComplex) {
    if (p.m <= 48 && lanes == kNarrowSegment) return launch_narrow_segments<T, 48>(p, dev, stream);
  }
  return launch_segments<T, 64>(p, dev, stream, lanes, rows, steps);
}
}  // namespace hsma
