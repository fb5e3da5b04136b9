// Column kernel (a column of X per thread, in registers), for batches and wide B when
// M * sizeof(T) <= 512 bytes (every dtype at m <= 32; float32, float64 and complex64 up to m = 64;
// see the split variant below). The order is rounded up to a compile-time M in {8, 16, 32, 48, 64}
// (L padded with identity), so the substitution is fully unrolled over registers. The whole block
// stages the triangles of its tasks (several (matrix, column tile) tasks share a block when the
// tiles are narrow) into shared memory in L's own layout, so that consecutive threads read
// consecutive addresses and write consecutive words (no bank conflicts); the substitution form
// follows the layout: row-major L uses the dot-product form, reading row i as vectors, column-major
// L the axpy form, reading column k as vectors (every lane reads the same address: a broadcast).
// The right-hand sides are loaded into registers first; the triangles follow by cp.async (sm_80+),
// 16 bytes per copy when L's rows are contiguous and aligned, so every load of a task is in flight
// at once without holding registers. With many blocks, a block has just its solving threads
// (registers, not threads, bound how many run per multiprocessor).
// Split variant (H = M / 2 rows per thread at a time: 32 of 64 for float32 and float64 batches, and
// complex128 on request, 16 of 32 for complex64 batches; 16-byte types' triangle packed, and
// row-major float64's, 64-row complex64's and, where A is batched, float32's): the top half is
// solved and stored to X, then the bottom half is loaded, updated by the top half read back from X
// (float32: from a copy kept in shared memory), and solved.
#pragma once
#include "common.cuh"

namespace hsma {
namespace {

constexpr int kColumnThreads = 128;
constexpr int kMinTileColumns = 8;    // narrowest column tile when spreading a few columns over SMs

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
// copy in shared memory) in chunks, the next chunk's loads in flight while the current one is
// applied. Each x_r sums over k in order whichever way L is read (rows as vectors when kRowMajor,
// else columns).
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
template <typename T, int M, bool kRowMajor, typename Layout, typename GroupSmem, typename GroupL, typename SA,
          typename SB>
__device__ __forceinline__ auto column_triangle_locate(const SolveProblem<T, SA, SB>& p, GroupSmem group_smem,
                                                       GroupL group_l) {
  return [&p, group_smem, group_l](unsigned e, T*& dst, T& fill) -> const SA* {
    const unsigned gg = e / (M * M), r = e % (M * M), um = static_cast<unsigned>(p.m);  // (M = 2^j: shifts, masks)
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
          typename Keep, typename SA, typename SB>
__device__ __forceinline__ void solve_column(T (&x)[H], const T* Ls, const T* Rs, const SolveProblem<T, SA, SB>& p,
                                             bool exact_task, SB* X, LoadRows load_rows, Solved solved, Keep keep) {
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
    SB* Xr = X + kBase * xrow;
#pragma unroll
    for (int r = 0; r < H; ++r, Xr += xrow)
      if (kBase + r < m) *Xr = from_compute<SB>(x[r]);
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
// 32 rows (column_max_registers): capped for more resident blocks, the other column kernels are
// no faster in any batch tried (docs/experiments.md).
// float64's split kernel keeps a packed triangle (17 KB instead of 33) and is capped at 128
// registers (4 blocks of 128 threads, 8 of 64; 8 bytes spilled), so that 8 matrices are solved at
// once per multiprocessor where shared memory (unpacked) or registers (148 uncapped) allow 6
// (docs/experiments.md). Row-major L only: the column-major form spills 128 bytes at that cap.
// complex64's split kernel at 64 rows (only where forced, column_rows=32) is packed and
// capped the same way (128 registers, 16 bytes spilled); the 8-lane segment kernel, which the
// launcher keeps there, is faster still. Not its 16-row split of 17-32 rows (the launcher's choice
// for complex64 batches), which the cap would take from 84 registers (5 blocks of 128 threads per
// multiprocessor) to 110 (4).
// (The selection packs these triangles by the same rule: select.h, column_split_capped.)
template <typename T, int M, int H, bool kRowMajor>
__host__ __device__ constexpr bool column_packed_capped() {  // row-major 8-byte split kernels packed and capped
  return H < M && kRowMajor && (std::is_same_v<T, double> || (std::is_same_v<T, complex<float>> && M == 64));
}
template <typename T, int M, int H>
constexpr bool column_caps_agree() {
  return column_packed_capped<T, M, H, true>() == column_split_capped(small_dtype<T>(), M, H, true) &&
         column_packed_capped<T, M, H, false>() == column_split_capped(small_dtype<T>(), M, H, false);
}
static_assert(column_caps_agree<float, 64, 32>() && column_caps_agree<double, 64, 32>() &&
                  column_caps_agree<complex<float>, 64, 32>() && column_caps_agree<complex<float>, 32, 16>() &&
                  column_caps_agree<complex<double>, 64, 32>() && column_caps_agree<complex<double>, 32, 16>(),
              "column_packed_capped: the rule of select.h's column_split_capped");
template <typename T, int M, int H, bool kRowMajor>
__host__ __device__ constexpr int column_min_blocks() {  // __launch_bounds__'s minimum blocks (0: none)
  // (Not on AMD, where hipcc reads the argument as minimum waves per execution unit; tuned on the
  // H200 only.)
  return !HSMA_HIP && column_packed_capped<T, M, H, kRowMajor>() ? 4 : 0;
}
// A register cap per thread finer than __launch_bounds__ gives for blocks of up to kColumnThreads
// threads (0: none): complex128's whole columns of 32 rows (row-major L), whose blocks in large
// batches are one warp, use 218 registers instead of 244 with a cap of 224 (no spills), so that 9
// blocks run per multiprocessor instead of 8. Lower caps (200, 184) spill and are slower
// (docs/experiments.md).
template <typename T, int M, int H, bool kRowMajor>
__host__ __device__ constexpr int column_max_registers() {
  return !HSMA_HIP && std::is_same_v<T, complex<double>> && M == 32 && H == M && kRowMajor ? 224 : 0;
}
// float32's split kernel (row-major L) also keeps the solved top half of its columns in shared
// memory (H x tc elements per group after the groups' triangles, thread t's rows at stride tc: no
// bank conflicts), from where the bottom half's update reads it instead of reloading X from L2.
// Not float64, whose 8 blocks per multiprocessor it would cut to 6, which is slower
// (docs/experiments.md). A 16-bit X (SB) always keeps it: X holds the top half rounded.
template <typename T, int M, int H, bool kRowMajor, typename SB = T>
__host__ __device__ constexpr bool column_stash() {
  return H < M && std::is_same_v<T, float> && (kRowMajor || !std::is_same_v<SB, T>);
}

template <typename T, int M, int H, bool kRowMajor, bool kPacked, typename SA, typename SB>
__device__ __forceinline__ void solve_columns_block(const SolveProblem<T, SA, SB>& p, int tc, int groups,
                                                    int64_t ntiles, bool vector_rows) {
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
    const SB* Bc = p.B + off[1] + j * p.b.col;
    auto load_rows = [&](int first) {  // rows first.. (row by row: one add per element)
      const SB* B = Bc + first * p.b.row;
      const int64_t row = p.b.row;
#pragma unroll
      for (int r = 0; r < H; ++r, B += row) x[r] = (active && first + r < m) ? to_compute<T>(*B) : T(0);
    };
    load_rows(0);
    __syncthreads();  // l_off is set, and the previous tasks are done with the triangles and flags
    if (tid < nvalid) exact[tid] = 0;  // (first set in finish_pivots, after the next barrier)

    // Element e of the groups' squares: consecutive e are consecutive in L's layout.
    const unsigned total = nvalid * M * M;
    if (std::is_same_v<SA, T> && kRowMajor && vector_rows) {
      // L's rows contiguous and 16-byte aligned, m = M (see launch_columns): 16-byte copies of the
      // pieces of rows that reach the triangle (the unused triangle and a unit diagonal they also
      // bring along are never read; with a packed layout, the pieces of a row's padded length).
      constexpr unsigned kVec = 16 / sizeof(T);
      for (unsigned c = tid; c < total / kVec; c += nthreads) {
        const unsigned e = c * kVec, gg = e / (M * M), r = e % (M * M), i = r / M, k = r % M;
        if (k <= i) copy_async_16(smem + gg * kGroupElems + Layout::at(i, k), p.L + l_off[gg] + i * p.l.row + k);
      }
    } else if (!std::is_same_v<SA, T> && kRowMajor && vector_rows) {
      // The same pieces of a 16-bit L (twice as many elements each), kUnroll loads in flight per thread, each piece
      // widened to T and stored as 16-byte pieces that reach the triangle (within the row's padded length). (Two
      // loads below 32 rows: four spill there.)
      constexpr unsigned kVec = Vec16<SA>::kLen, kOut = 16 / sizeof(T), kUnroll = M >= 32 ? 4 : 2;
      for (unsigned c0 = tid; c0 < total / kVec; c0 += kUnroll * nthreads) {
        Vec16<SA> w[kUnroll];
#pragma unroll
        for (unsigned u = 0; u < kUnroll; ++u) {
          const unsigned e = (c0 + u * nthreads) * kVec, gg = e / (M * M), r = e % (M * M), i = r / M, k = r % M;
          if (e < total && k <= i) w[u] = *reinterpret_cast<const Vec16<SA>*>(p.L + l_off[gg] + i * p.l.row + k);
        }
#pragma unroll
        for (unsigned u = 0; u < kUnroll; ++u) {
          const unsigned e = (c0 + u * nthreads) * kVec, gg = e / (M * M), r = e % (M * M), i = r / M, k = r % M;
#pragma unroll
          for (unsigned h = 0; h < kVec; h += kOut) {
            if (e >= total || k + h > i) continue;
            Vec16<T> o;
#pragma unroll
            for (unsigned q = 0; q < kOut; ++q) o.v[q] = to_compute<T>(w[u].v[h + q]);
            *reinterpret_cast<Vec16<T>*>(smem + gg * kGroupElems + Layout::at(i, k + h)) = o;
          }
        }
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
      SB* X = p.X + off[2] + j * p.x.col;
      if constexpr (column_stash<T, M, H, kRowMajor, SB>()) {  // the top half kept in shared memory too
        T* slot = smem + groups * kGroupElems + g * H * tc + t;
        solve_column<T, M, H, Layout, kRowMajor>(
            x, Ls, Rs, p, exact[g] != 0, X, load_rows, [&](int k) { return slot[k * tc]; },
            [&](int r, T v) { slot[r * tc] = v; });
      } else {
        // (A 16-bit X is never read back: its split kernels keep the stash.)
        static_assert(H == M || std::is_same_v<SB, T>, "solve_columns_block: a rounded X read back");
        solve_column<T, M, H, Layout, kRowMajor>(
            x, Ls, Rs, p, exact[g] != 0, X, load_rows,
            [&](int k) -> T {
              if constexpr (std::is_same_v<SB, T>) return reload(X + k * p.x.row);
              return T(0);
            },
            [](int, T) {});
      }
    }
  }
}

// The column kernel's entry points: ptxas's register choice (within __launch_bounds__), or capped
// at column_max_registers (__maxnreg__; not on the others, where even a cap of 255 changes
// ptxas's choices).
template <typename T, int M, int H, bool kRowMajor, bool kPacked, typename SA, typename SB>
__global__ void __launch_bounds__(kColumnThreads, (column_min_blocks<T, M, H, kRowMajor>()))
small_solve_columns_kernel(SolveProblem<T, SA, SB> p, int tc, int groups, int64_t ntiles, bool vector_rows) {
  grid_dependency_sync(p.dependent_launch == 1);
  solve_columns_block<T, M, H, kRowMajor, kPacked>(p, tc, groups, ntiles, vector_rows);
}
template <typename T, int M, int H, bool kRowMajor, bool kPacked, typename SA, typename SB>
__global__ void HSMA_MAXNREG(column_max_registers<T, M, H, kRowMajor>())
small_solve_columns_capped_kernel(SolveProblem<T, SA, SB> p, int tc, int groups, int64_t ntiles, bool vector_rows) {
  grid_dependency_sync(p.dependent_launch == 1);
  solve_columns_block<T, M, H, kRowMajor, kPacked>(p, tc, groups, ntiles, vector_rows);
}

// Columns per task of the column kernels: n rounded up to a power of two, at most the block;
// narrower (more tasks on more multiprocessors, each loading its own copy of L) while the grid
// would leave multiprocessors idle: a single solve is a chain of M dependent steps per column.
template <typename T, typename SA, typename SB>
int64_t column_tile_width(const SolveProblem<T, SA, SB>& p, const DeviceInfo& dev) {
  int64_t tc = 1;
  while (tc < p.n && tc < kColumnThreads) tc *= 2;
  while (tc > kMinTileColumns && p.batch * ((p.n + tc - 1) / tc) < dev.multiprocessors) tc /= 2;
  return tc;
}

template <typename T, int M, int H, bool kRowMajor, bool kPacked, typename SA, typename SB>
hsmaError_t launch_columns_as(const SolveProblem<T, SA, SB>& p, const DeviceInfo& dev, hsmaStream_t stream) {
  const int64_t tc = column_tile_width(p, dev);
  const int64_t ntiles = (p.n + tc - 1) / tc;
  const int64_t ntasks = p.batch * ntiles;
  const int64_t group_bytes =
      int64_t(ColumnLayout<T, M, kRowMajor, kPacked>::kTriangle + M +
              (column_stash<T, M, H, kRowMajor, SB>() ? H * tc : 0)) *
      sizeof(T);
  const int64_t budget = kSharedBudgetBytes - kColumnThreads * int64_t(sizeof(int64_t) + sizeof(int));
  int64_t groups = kColumnThreads / tc;
  // Many tasks whose columns fill two warps or more (or one warp, with whole columns; complex64's
  // 16-row split kernel is slower with it): one task per block, so that blocks start and finish
  // one matrix at a time (docs/experiments.md).
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
  // Whole 16-byte pieces of L's rows can be copied (with cp.async, or loaded and widened where L is stored in 16
  // bits) when the rows are contiguous and every row of every batch entry starts 16-byte aligned, and there is no
  // padding (m = M).
  constexpr int64_t kVec = Vec16<SA>::kLen;
  bool vector_rows = (std::is_same_v<SA, T> ? !HSMA_HIP && p.async_copy : true) && kRowMajor && p.l.col == 1 &&
                     p.m == M && p.l.row % kVec == 0 && reinterpret_cast<uintptr_t>(p.L) % 16 == 0;
  for (int d = 0; d < p.bl.ndim; ++d) vector_rows = vector_rows && p.bl.stride[0][d] % kVec == 0;
  const size_t smem = static_cast<size_t>(groups * group_bytes);
  const unsigned block = static_cast<unsigned>(threads);
  const bool early = !(M == 8 && sizeof(T) == 8);  // (see released)
  if constexpr (column_max_registers<T, M, H, kRowMajor>() > 0)
    return launch_small(small_solve_columns_capped_kernel<T, M, H, kRowMajor, kPacked, SA, SB>, grid, block, smem,
                        stream, p, dev, early, int(tc), int(groups), ntiles, vector_rows);
  else
    return launch_small(small_solve_columns_kernel<T, M, H, kRowMajor, kPacked, SA, SB>, grid, block, smem, stream,
                        p, dev, early, int(tc), int(groups), ntiles, vector_rows);
}

// The column kernel of M rows, H at a time, in the layout of L's triangle in shared memory the plan
// says: rows (kRowMajor) or columns, packed or not. Only the layouts the selection can choose for
// T, M and H are compiled (select.h: column_packed, and for float32's split kernel
// column_packs_batched_a).
template <typename T, int M, int H = M, typename SA, typename SB>
hsmaError_t launch_columns(const SolveProblem<T, SA, SB>& p, const SmallPlan& plan, const DeviceInfo& dev,
                           hsmaStream_t stream) {
  constexpr SmallDtype kDtype = small_dtype<T>();
  if (!plan.row_major) return launch_columns_as<T, M, H, false, column_packed(kDtype, M, H, false)>(p, dev, stream);
  if constexpr (column_packs_batched_a(kDtype, M, H, HSMA_HIP)) {
    if (plan.packed) return launch_columns_as<T, M, H, true, true>(p, dev, stream);
  }
  return launch_columns_as<T, M, H, true, column_packed(kDtype, M, H, true)>(p, dev, stream);
}

// The column kernel the plan names: its order M and rows per thread H.
template <typename T, typename SA, typename SB>
hsmaError_t run_columns(const SolveProblem<T, SA, SB>& p, const SmallPlan& plan, const DeviceInfo& dev,
                        hsmaStream_t stream) {
  constexpr SmallDtype kDtype = small_dtype<T>();
  switch (plan.rows) {
    case 8:
      return launch_columns<T, 8>(p, plan, dev, stream);
    case 16:
      return launch_columns<T, 16>(p, plan, dev, stream);
    case 32:
      if constexpr (small_dtype_complex(kDtype)) {
        if (plan.column_rows == 16) return launch_columns<T, 32, 16>(p, plan, dev, stream);
      }
      return launch_columns<T, 32>(p, plan, dev, stream);
    case 48:
      if constexpr (column_fits(kDtype, 48)) return launch_columns<T, 48>(p, plan, dev, stream);
      break;
    default:
      if (plan.column_rows == 32) return launch_columns<T, 64, 32>(p, plan, dev, stream);
      if constexpr (column_fits(kDtype, 64)) return launch_columns<T, 64>(p, plan, dev, stream);
      break;
  }
  return hsmaError_t(1);  // (not a plan of select.h)
}

}  // namespace
}  // namespace hsma
