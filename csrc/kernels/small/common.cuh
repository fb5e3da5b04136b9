// Device helpers shared by the small-path kernel families (small/*.cuh): task coordinates, the
// staging of triangles into shared memory with their pivots' reciprocals, the segment layout, and
// the launch helpers (programmatic dependent launch).
#pragma once
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "../trsm_problem.h"
#include "select.h"

namespace hsma {
namespace {

constexpr int kLoadUnroll = 8;

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
// With `async` (p.async_copy), cp.async available and L stored as T, every copy is in flight at
// once and holds no register; otherwise kUnroll loads are in flight before their stores (a 16-bit
// L widened to T in between). The copies have landed after copy_async_wait_all() and a barrier.
// No conjugation here: see finish_pivots.
template <typename T, int kUnroll, typename Locate>
__device__ __forceinline__ void stage_triangle(bool async, unsigned first, unsigned total, unsigned stride,
                                               Locate locate) {
  // (L's stored type; lvalues formed without std::declval, which clang takes for a host function)
  using Src = std::remove_cv_t<std::remove_pointer_t<decltype(locate(0u, *static_cast<T**>(nullptr),
                                                                     *static_cast<T*>(nullptr)))>>;
#if HSMA_ASYNC_COPY
  if constexpr (std::is_same_v<Src, T>) {
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
      const Src* src = e < total ? locate(e, dst, fill) : nullptr;
      if constexpr (std::is_same_v<Src, T>)
        v[u] = src != nullptr ? *src : fill;
      else
        v[u] = src != nullptr ? to_compute<T>(*src) : fill;
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
template <typename T, typename SA, typename SB, typename Pivot, typename Barrier>
__device__ __forceinline__ void finish_pivots(T* Ls, int n, int npivots, const SolveProblem<T, SA, SB>& p, int t,
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

// An empty kernel, compiled with the small-path kernels of its translation unit: the code the GPU
// loads for it says whether theirs waits (kernels_wait).
__global__ void dependent_launch_probe_kernel() {}

// Whether the code this GPU runs for the small-path kernels waits for the kernel before it
// (grid_dependency_sync). Only code compiled for a virtual architecture of 9.0 or newer has
// griddepcontrol.wait, whatever SASS it ends up as, and cudaFuncAttributes::ptxVersion tells
// which it is (90 for compute_90 code; 80 for compute_80 code, whether built as sm_90 SASS or
// JIT-compiled from PTX). A build without such code for this GPU (e.g.
// TORCH_CUDA_ARCH_LIST=8.0+PTX on a Hopper GPU) therefore launches plainly: a dependent launch of a
// kernel that does not wait could read its inputs before they are written. Asked once per device.
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
// kernels' code waits (kernels_wait), unless pdl=0 is forced. Every small-path kernel calls
// grid_dependency_sync() before its first global access, and releases the next kernel's launch
// there when p.dependent_launch = 1 (else the next kernel launches when this one completes).
template <typename T, typename SA, typename SB>
bool dependent(const SolveProblem<T, SA, SB>& p, const DeviceInfo& dev) {
  return p.dependent_launch != 0 && dev.cc_major >= 9 && kernels_wait(dev);
}

// p with the release point of its launch resolved: the forced one (override pdl), else when the
// kernel starts (`early`) or when it completes. Releasing at the start overlaps the most (about
// twice the GPU time that releasing at completion saves on a single solve: docs/experiments.md); it
// is slower where the grid is sized to the GPU (the folding tensor-core kernel) and for the column
// kernel at 8 rows of 8-byte types on batches, whose launchers release at completion (single
// solves of those kernels included).
template <typename T, typename SA, typename SB>
SolveProblem<T, SA, SB> released(const SolveProblem<T, SA, SB>& p, bool early) {
  SolveProblem<T, SA, SB> q = p;
  if (q.dependent_launch < 0) q.dependent_launch = early ? 1 : 2;
  return q;
}

// kernel<<<grid, block, smem, stream>>>(p, args...) through launch_kernel: a dependent launch where
// dependent() says so, p with its release point resolved (`early`: the launcher's choice, see
// released). Every launch of a small-path kernel goes through here.
template <typename T, typename SA, typename SB, typename... Params, typename... Args>
hsmaError_t launch_small(void (*kernel)(SolveProblem<T, SA, SB>, Params...), dim3 grid, dim3 block, size_t smem,
                         hsmaStream_t stream, const SolveProblem<T, SA, SB>& p, const DeviceInfo& dev, bool early,
                         Args... args) {
  return launch_kernel(kernel, grid, block, smem, stream, dependent(p, dev), released(p, early), args...);
}

// The selection's name for T (select.h).
template <typename T> constexpr SmallDtype small_dtype() {
  if constexpr (std::is_same_v<T, float>) return SmallDtype::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return SmallDtype::kFloat64;
  else if constexpr (std::is_same_v<T, complex<float>>) return SmallDtype::kComplex64;
  else {
    static_assert(std::is_same_v<T, complex<double>>, "small_dtype: a small-path type");
    return SmallDtype::kComplex128;
  }
}

// Whether one A serves every task of a problem: a single solve, or A broadcast over the batch.
template <typename T, typename SA, typename SB> bool shares_a(const SolveProblem<T, SA, SB>& p) {
  bool shared = true;
  for (int d = 0; d < p.bl.ndim; ++d) shared = shared && (p.bl.size[d] == 1 || p.bl.stride[0][d] == 0);
  return shared;
}

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
// skipped for a unit triangle (finish_pivots writes the ones). The lanes step in lockstep rather
// than each unrolling its own range, so that a warp's copies stay one row (or column) of L. About
// 8 SASS instructions per copy, against 34 when each slot's position is computed from scratch.
template <typename T, int M, int kThreads, typename SB>
__device__ __forceinline__ void stage_packed_columns(T* Ls, const T* L, const SolveProblem<T, T, SB>& p, bool k_fast,
                                                     int t) {
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
// nvcc does not, and dropped the code after such a call as unreachable; scripts/compile_check.sh
// compares the two builds).
struct NoCallback {
  __device__ void operator()() const {}
};

// Loads L's lower triangle (conj applied, the unused triangle never read) into Ls, column by column
// as Layout places it (by default packed: column k holds rows k..M-1 at packed_start(k)) and
// padded to the identity up to M, and the pivots' reciprocals into Rs (1 for a unit or padded
// diagonal); sets *exact when a pivot needs a true division. Thread t of kThreads walks the square
// M x M in steps of kThreads, along the dimension of L with the smaller stride (coalesced loads),
// or, with cp.async into the packed columns by at least M threads and no unrolling (the tile
// kernel, 8-lane segments, 32-row warp tasks), only the triangle (stage_packed_columns);
// barrier() synchronises the kThreads threads, and the caller synchronises them again before
// reading Ls and Rs. issued() runs once the copies are issued,
// before waiting for them (the tile kernel loads its right-hand sides there). A 16-bit L (SA) is
// widened to T element by element (stage_triangle), without cp.async.
template <typename T, int M, int kThreads, typename Layout = SegmentLayout<M, 1>, int kStageUnroll = 1,
          typename Barrier, typename Issued = NoCallback, typename SA, typename SB>
__device__ __forceinline__ void load_packed_triangle(T* Ls, T* Rs, int* exact, const SA* L,
                                                     const SolveProblem<T, SA, SB>& p, int t, Barrier barrier,
                                                     Issued issued = Issued()) {
  constexpr int kUnroll = M * M / kThreads < kLoadUnroll ? M * M / kThreads : kLoadUnroll;
  static_assert(kUnroll > 0, "load_packed_triangle: fewer elements than threads");
  static_assert(kThreads >= M || M % kThreads == 0, "load_packed_triangle: whole rows per thread");
  const int m = static_cast<int>(p.m);
  const bool k_fast = (p.l.col < 0 ? -p.l.col : p.l.col) <= (p.l.row < 0 ? -p.l.row : p.l.row);
  bool staged = false;
#if HSMA_ASYNC_COPY
  if constexpr (!std::is_same_v<SA, T>) {
  } else if constexpr (std::is_same_v<Layout, SegmentLayout<M, 1>> && kThreads >= M && kStageUnroll == 1) {
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
    stage_triangle<T, kUnroll>(p.async_copy, t, M * M, kThreads, [&](unsigned e, T*& dst, T& fill) -> const SA* {
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

}  // namespace
}  // namespace hsma
