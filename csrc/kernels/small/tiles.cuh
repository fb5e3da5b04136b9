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
//     column group reading L(g + 4 s, k) read consecutive words (no bank conflicts; the eight
//     column groups' reads of one word are a broadcast), and each read feeds tile_lane_cols()
//     multiply-adds.
//   - Step k (rows in order): every lane scales its row of slot k / 4 by that row's pivot
//     reciprocal (the lanes of row group k % 4 hold row k, final by now; the others' products are
//     thrown away), a shuffle from lane (k % 4, c) broadcasts x_k to its column group, and every
//     lane subtracts L(i, k) x_k from its rows i > k. A row's slot is scaled and stored once its
//     row group's step is past. So each x_i subtracts L(i, k) x_k for k in increasing order, as in
//     the other kernels, and the value stored is the one broadcast.
// The four steps of a slot are a loop of kSteps steps per iteration: one for 8-byte types, four
// (the slot unrolled) for complex128, whose lanes hold one column, so a step is half the code
// (select.h: tile_steps; unrolled, complex64's slots are slower, presumably for the instruction
// cache: not profiled).
// Registers: at most 128 per thread (4 blocks of 128 threads per multiprocessor). Tasks whose
// pivots need a division leave the tiles (substitute_column_exact): with the division inlined in
// the substitution, ptxas (CUDA 13.0, sm_90) spilled for complex64 and complex128, and kept one
// register pair for all of a step's shared-memory reads in the first four slots, each read waited
// on by its multiply-adds; without it, complex64 fits 128 registers without spills and keeps
// several reads in flight.
#pragma once
#include "common.cuh"

namespace hsma {
namespace {

constexpr int kTileM = 64;        // the padded order
constexpr int kTileRowLanes = 4;  // lanes along a column: lane (g, c) holds rows g + 4 s
constexpr int kTileColLanes = 8;  // column groups of a warp
constexpr int kTileMaxWarps = 8;
// Columns per lane, and per warp.
template <typename T> __host__ __device__ constexpr int tile_lane_cols() { return sizeof(T) >= 16 ? 1 : 2; }
template <typename T> __host__ __device__ constexpr int tile_warp_cols() { return kTileColLanes * tile_lane_cols<T>(); }
static_assert(32 * kTileMaxWarps == kTileThreads && tile_warp_cols<float>() == tile_columns(SmallDtype::kFloat32) &&
                  tile_warp_cols<double>() == tile_columns(SmallDtype::kFloat64) &&
                  tile_warp_cols<complex<float>>() == tile_columns(SmallDtype::kComplex64) &&
                  tile_warp_cols<complex<double>>() == tile_columns(SmallDtype::kComplex128),
              "the tile kernel's shape as select.h sees it");
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
    // as well took fewer instructions but longer.
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

// The tile kernel in blocks of kThreads, `steps` (1, 2 or 4) steps per loop iteration of the
// substitution.
template <typename T, int kThreads>
hsmaError_t launch_tiles_as(const SolveProblem<T>& p, const DeviceInfo& dev, hsmaStream_t stream, int64_t ntiles,
                            int steps) {
  const int64_t ntasks = p.batch * ntiles;
  const unsigned grid = small_grid(p, ntasks);
  if (steps == 1)
    return launch_small(small_solve_tiles_kernel<T, kThreads, 1>, grid, kThreads, 0, stream, p, dev, true, ntiles);
  if (steps == 4)
    return launch_small(small_solve_tiles_kernel<T, kThreads, 4>, grid, kThreads, 0, stream, p, dev, true, ntiles);
  return launch_small(small_solve_tiles_kernel<T, kThreads, 2>, grid, kThreads, 0, stream, p, dev, true, ntiles);
}
// The tile kernel the plan names: four or eight warps (plan.threads), plan.steps steps per loop
// iteration (select.h: tile_plan).
template <typename T>
hsmaError_t run_tiles(const SolveProblem<T>& p, const SmallPlan& plan, const DeviceInfo& dev, hsmaStream_t stream) {
  constexpr int kWide = 32 * kTileMaxWarps, kNarrow = kWide / 2;
  const int64_t tile_cols = (plan.threads / 32) * tile_warp_cols<T>();
  const int64_t ntiles = (p.n + tile_cols - 1) / tile_cols;
  if (plan.threads == kNarrow) return launch_tiles_as<T, kNarrow>(p, dev, stream, ntiles, plan.steps);
  return launch_tiles_as<T, kWide>(p, dev, stream, ntiles, plan.steps);
}

}  // namespace
}  // namespace hsma
