// The sweep: L X = alpha B for orders above 64 against a few columns (a panel of up to 16), in one
// launch that reads the triangle once per panel (SweepProblem in trsm_problem.h).
//
// L's rows are cut into blocks of R. Row block i needs X's blocks 0..i-1; its products with them
// are split into tasks of at most G column blocks, so that no block of threads streams more than
// G R x R tiles and a long row block is read by many multiprocessors at once:
//   - a task streams its tiles of L into shared memory (the next tile is loaded into registers
//     while the current one is used), waits for each block of X it needs, and accumulates;
//   - every task but the last of its row block publishes its partial sum;
//   - the last (the owner) adds the others' partial sums in a fixed order (the result does not
//     depend on timing), then waits for X's block i-1, the only wait on the critical path, and
//     multiplies by the inverse of the diagonal block, which it computed while waiting (the owners
//     start together, so only the first row blocks wait for their inversion), and publishes X's
//     block i.
// Values are published as tagged words: each 32 bits of a value beside a nonzero tag in one 64-bit
// word, which a store writes and a load reads whole. A reader polls the words it needs until
// their tags are set: one memory round trip per hand-off, no flag and no fence.
//
// Tasks are taken from a counter in order (chain by chain, row block by row block, the owner
// last): a task only waits for tasks taken before it, by blocks already running, so the grid
// always makes progress, whatever the order the hardware schedules blocks in.
//
// Inverses that are not accurate (an entry that is inf, nan or subnormal: a pivot whose reciprocal
// overflows or underflows) are not used: the owner substitutes in the diagonal block instead,
// dividing by each pivot.
//
// The repair mode (p.repair set, launch_sweep_repair; the blocked path's repair, cuda/exec_repair.cpp): one block
// substitutes in every diagonal block of the batch entries whose inversion flagged an inaccurate inverse, and does
// nothing unless one of the flags is set.
#include "trsm_problem.h"

namespace hsma {
namespace {

constexpr int kSweepThreads = 256;

template <int R> struct SweepShape {
  static constexpr int kRowThreads = kSweepThreads / R;  // threads sharing a row of a tile
  static constexpr int kRowCols = R / kRowThreads;       // columns of a tile per thread
  static constexpr int kPitch = R + 1;                   // shared-memory row pitch (odd: no bank conflicts)
  static constexpr int kPerThread = R * R / kSweepThreads;
};

// Two blocks per multiprocessor (128 registers a thread) where a tile and the sums fit in them
// (real types, R = 64); else one (255): it still keeps R * R elements in flight, enough to stream.
template <typename T, int R, int NC> constexpr int sweep_min_blocks() {
  return R == 64 && sizeof(T) == sizeof(typename real_of<T>::type) && sizeof(T) * NC <= 64 ? 2 : 1;
}

// A value as sizeof(T) / 4 tagged words (see the top of the file), written and read whole.
template <typename T> constexpr int kTaggedWords = static_cast<int>(sizeof(T) / 4);
using Word = unsigned long long;

template <typename T> __device__ inline void put_tagged(Word* dst, T v) {
  unsigned int bits[kTaggedWords<T>];
  memcpy(bits, &v, sizeof(T));
#pragma unroll
  for (int w = 0; w < kTaggedWords<T>; ++w) *static_cast<volatile Word*>(dst + w) = (Word(1) << 32) | bits[w];
}

template <typename T> __device__ inline T get_tagged(const Word* src) {
  unsigned int bits[kTaggedWords<T>];
#pragma unroll
  for (int w = 0; w < kTaggedWords<T>; ++w) {
    Word x;
    do {
      x = *static_cast<const volatile Word*>(src + w);
    } while ((x >> 32) == 0);
    bits[w] = static_cast<unsigned int>(x);
  }
  T v;
  memcpy(&v, bits, sizeof(T));
  return v;
}

// The R x R tile of L at L (rows past `rows` zero) in registers, element u of this thread at
// (rr, cc) = (first + u * kStep along rows, fixed column) for a row-major L, the transpose for a
// column-major one: consecutive threads read consecutive elements of L's contiguous direction.
template <int R> struct TileWalk {
  static constexpr int kStep = kSweepThreads / R;
  int rr, cc;  // element 0 of this thread
  bool row_major;
  __device__ explicit TileWalk(bool rm) : row_major(rm) {
    const int t = static_cast<int>(threadIdx.x);
    rr = rm ? t / R : t % R;
    cc = rm ? t % R : t / R;
  }
};

template <typename T, int R>
__device__ inline void load_tile(T (&v)[SweepShape<R>::kPerThread], const T* L, MatrixRef l, int rows, bool conj,
                                 const TileWalk<R>& w, int cols = R) {
  constexpr int kStep = TileWalk<R>::kStep;
  const T* src = L + w.rr * l.row + w.cc * l.col;
  const int64_t step = kStep * (w.row_major ? l.row : l.col);
#pragma unroll
  for (int u = 0; u < SweepShape<R>::kPerThread; ++u) {
    const int rr = w.row_major ? w.rr + u * kStep : w.rr, cc = w.row_major ? w.cc : w.cc + u * kStep;
    v[u] = rr < rows && cc < cols ? conj_if(src[u * step], conj) : T(0);
  }
}

template <typename T, int R>
__device__ inline void store_tile(const T (&v)[SweepShape<R>::kPerThread], T* tile, const TileWalk<R>& w) {
  constexpr int kStep = TileWalk<R>::kStep, kPitch = SweepShape<R>::kPitch;
  T* dst = tile + w.rr * kPitch + w.cc;
  const int step = kStep * (w.row_major ? kPitch : 1);
#pragma unroll
  for (int u = 0; u < SweepShape<R>::kPerThread; ++u) dst[u * step] = v[u];
}

// acc -= tile(r, this thread's columns) * xs(those rows, :), xs row-major R x NC. kLower: the
// tile is lower triangular and only its columns <= r are used (an inverse's zeros times an inf
// of xs must not make a nan where substitution has none).
template <typename T, int R, int NC, bool kLower = false>
__device__ inline void tile_product(const T* tile, const T* xs, T (&acc)[NC], int r, int q) {
  constexpr int kCols = SweepShape<R>::kRowCols;
  const T* a = tile + r * SweepShape<R>::kPitch + q * kCols;
  const T* x = xs + q * kCols * NC;
#pragma unroll 8
  for (int cc = 0; cc < kCols; ++cc) {
    if (kLower && q * kCols + cc > r) break;
    const T av = a[cc];
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[c] = fms(acc[c], av, x[cc * NC + c]);
  }
}

// Sums acc over the threads of a row (consecutive lanes); every one of them gets the total.
template <typename T, int R, int NC> __device__ inline void row_sum(T (&acc)[NC], int q) {
  constexpr int kRowThreads = SweepShape<R>::kRowThreads;
#pragma unroll
  for (int off = kRowThreads / 2; off > 0; off /= 2)
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[c] = acc[c] + shfl(acc[c], q ^ off, kRowThreads);
}

// The inverse of the diagonal block D (in D, `rows` x `rows`, lower; unit: ones on the diagonal)
// into inv, zero elsewhere: column c by substitution against e_c, one thread per column, four
// partial sums per row to shorten the chain of dependent products; dividing by each pivot.
template <typename T, int R>
__device__ void invert_block(const T* D, T* inv, int rows, bool unit) {
  constexpr int kPitch = SweepShape<R>::kPitch;
  const int c = static_cast<int>(threadIdx.x);
  if (c >= R) return;
  for (int rr = 0; rr < R; ++rr) {
    T y = T(0);
    if (c < rows && rr >= c && rr < rows) {
      T s[4] = {T(rr == c ? 1 : 0), T(0), T(0), T(0)};
      const T* drow = D + rr * kPitch;
      int j = c;
      for (; j + 3 < rr; j += 4)
#pragma unroll
        for (int h = 0; h < 4; ++h) s[h] = fms(s[h], drow[j + h], inv[(j + h) * kPitch + c]);
      for (; j < rr; ++j) s[0] = fms(s[0], drow[j], inv[j * kPitch + c]);
      y = (s[0] + s[1]) + (s[2] + s[3]);
      if (!unit) y = y / drow[rr];
    }
    inv[rr * kPitch + c] = y;  // (each thread reads only its own column: no barrier)
  }
}

// Solves D y = xs in place (D: the diagonal block at Ld, `rows` rows), column by column,
// dividing by each pivot.
template <typename T, int R, int NC>
__device__ void substitute(T* xs, const T* Ld, MatrixRef l, int rows, bool conj, bool unit) {
  const int tid = static_cast<int>(threadIdx.x);
  for (int cc = 0; cc < rows; ++cc) {
    if (!unit && tid < NC) xs[cc * NC + tid] = xs[cc * NC + tid] / conj_if(Ld[cc * (l.row + l.col)], conj);
    __syncthreads();
    for (int e = tid; e < R * NC; e += kSweepThreads) {
      const int rr = e / NC, c = e % NC;
      if (rr > cc && rr < rows) xs[e] = fms(xs[e], conj_if(Ld[rr * l.row + cc * l.col], conj), xs[cc * NC + c]);
    }
    __syncthreads();
  }
}

// Row block and task within it of a chain's task u (tasks_before is increasing in the row block).
__device__ inline void locate(int64_t u, int64_t nblk, int64_t g, int64_t& i, int64_t& s) {
  int64_t lo = 0, hi = nblk - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (sweep_tasks_before(mid, g) <= u) lo = mid; else hi = mid - 1;
  }
  i = lo;
  s = u - sweep_tasks_before(lo, g);
}

template <typename T, int R, int NC>
__global__ void __launch_bounds__(kSweepThreads, (sweep_min_blocks<T, R, NC>()))
sweep_kernel(SweepProblem<T> p, int64_t nblk, int64_t npanels, int64_t per_chain, int64_t ntasks) {
  using Shape = SweepShape<R>;
  constexpr int kPitch = Shape::kPitch;
  extern __shared__ __align__(16) unsigned char sweep_smem[];
  const bool repair = p.repair != nullptr;
  T* Ls = reinterpret_cast<T*>(sweep_smem);  // the current tile of L
  T* Is = Ls + R * kPitch;                    // the inverse of the owner's diagonal block (not in a repair)
  T* xs = Is + (repair ? 0 : R * kPitch);     // a block of X (R x NC), then the diagonal right-hand side
  T* bs = xs + R * NC;                        // the owner's alpha B_i
  __shared__ int64_t task_shared;

  const int64_t chains = ntasks / per_chain, g = p.segment;
  const int tid = static_cast<int>(threadIdx.x), r = tid / Shape::kRowThreads, q = tid % Shape::kRowThreads;
  constexpr int W = kTaggedWords<T>;
  const int64_t chain_words = nblk * R * NC * W;
  Word* xw = p.work + 1;                                   // X: [chain][row][column], W words each
  Word* pw = xw + (repair ? 1 : chains) * chain_words;     // partial sums: [task][row][column]
  if (repair) {  // one block: nothing to do unless an inverse was inaccurate
    bool any = false;
    for (int64_t v = tid; v < p.repair_count; v += kSweepThreads) any = any || p.repair[v] != 0;
    if (!__syncthreads_or(any)) return;
    if (tid == 0) p.work[0] = 0;  // the counter (the exchange is zeroed per chain below; no partials)
    __threadfence_block();
    __syncthreads();
  }
  unsigned* counter = reinterpret_cast<unsigned*>(p.work);
  const TileWalk<R> walk((p.l.col < 0 ? -p.l.col : p.l.col) <= (p.l.row < 0 ? -p.l.row : p.l.row));

  for (;;) {
    if (tid == 0) task_shared = atomicAdd(counter, 1u);
    __syncthreads();
    const int64_t t = task_shared;
    __syncthreads();  // (task_shared is written again by the next task)
    if (t >= ntasks) break;
    const int64_t chain = t / per_chain;
    int64_t i, s;
    locate(t % per_chain, nblk, g, i, s);
    const int64_t ns = i == 0 ? 1 : (i + g - 1) / g;  // tasks of row block i
    const bool owner = s == ns - 1;
    const int64_t j0 = s * g, j1 = j0 + g < i ? j0 + g : i;
    const int64_t e = chain / npanels, c0 = (chain % npanels) * NC;
    const int nc = static_cast<int>(p.n - c0 < NC ? p.n - c0 : NC);
    const int64_t row0 = i * R;
    const int rows = static_cast<int>(p.m - row0 < R ? p.m - row0 : R);
    if (repair) {  // a batch entry whose triangle's inverses were all accurate keeps its X
      const int* flags = p.repair + (p.l_batch != 0 ? e : 0) * p.repair_per_entry;
      bool flagged = false;
      for (int64_t v = tid; v < p.repair_per_entry; v += kSweepThreads) flagged = flagged || flags[v] != 0;
      if (!__syncthreads_or(flagged)) continue;
      if (t % per_chain == 0) {  // a chain's first task: its exchange area (one, reused chain after chain)
        for (int64_t v = tid; v < chain_words; v += kSweepThreads) xw[v] = 0;
        __syncthreads();
      }
    }
    const T* Lr = p.L + e * p.l_batch + row0 * p.l.row;  // row block i
    T* Xp = p.X + e * p.x_batch + c0 * p.x.col;

    bool substituting = repair;
    if (owner) {  // off the critical path: alpha B_i and the inverse of the diagonal block
      const T* Bp = p.B + e * p.b_batch + c0 * p.b.col;
      for (int v = tid; v < R * NC; v += kSweepThreads) {
        const int rr = v / NC, c = v % NC;
        bs[v] = rr < rows && c < nc ? p.alpha * Bp[(row0 + rr) * p.b.row + c * p.b.col] : T(0);
      }
      __syncthreads();  // (bs is read by other threads below, with or without a tile in between)
      if (!substituting) {
        T d[Shape::kPerThread];  // the diagonal block (its strictly upper part is loaded, never used)
        load_tile<T, R>(d, Lr + row0 * p.l.col, p.l, rows, p.conj, walk, rows);
        store_tile<T, R>(d, Ls, walk);
        __syncthreads();
        invert_block<T, R>(Ls, Is, rows, p.unit);
        __syncthreads();
        bool bad = false;
        for (int v = tid; v < R * R; v += kSweepThreads) bad = bad || inaccurate(Is[(v / R) * kPitch + v % R]);
        substituting = __syncthreads_or(bad);  // (also: Ls is free again)
      }
    }

    T acc[NC];  // minus the products so far, for row r (partly: this thread's columns)
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[c] = T(0);
    T tile[Shape::kPerThread];
    if (j0 < j1) load_tile<T, R>(tile, Lr + j0 * R * p.l.col, p.l, rows, p.conj, walk);
    for (int64_t j = j0; j < j1; ++j) {
      store_tile<T, R>(tile, Ls, walk);
      if (j + 1 < j1) load_tile<T, R>(tile, Lr + (j + 1) * R * p.l.col, p.l, rows, p.conj, walk);
      if (owner && j == i - 1 && ns > 1) {  // the other tasks' partial sums, in task order per thread
        const int64_t first = chain * per_chain + sweep_tasks_before(i, g);
        for (int64_t o = q; o < ns - 1; o += Shape::kRowThreads)
#pragma unroll
          for (int c = 0; c < NC; ++c) acc[c] = acc[c] + get_tagged<T>(pw + (((first + o) * R + r) * NC + c) * W);
      }
      const Word* xj = xw + (repair ? 0 : chain) * chain_words + j * R * NC * W;  // X's block j, as published
      for (int v = tid; v < R * NC; v += kSweepThreads) xs[v] = v % NC < nc ? get_tagged<T>(xj + v * W) : T(0);
      __syncthreads();
      tile_product<T, R, NC>(Ls, xs, acc, r, q);
      __syncthreads();
    }
    row_sum<T, R, NC>(acc, q);

    if (!owner) {
      if (q == 0)
#pragma unroll
        for (int c = 0; c < NC; ++c) put_tagged(pw + ((t * R + r) * NC + c) * W, acc[c]);
      continue;
    }
    Word* xi = xw + (repair ? 0 : chain) * chain_words + i * R * NC * W;  // X's block i, for the tasks below

    // The diagonal block: X_i = inv(L_ii) (alpha B_i - sum_j L_ij X_j).
    if (q == 0)
#pragma unroll
      for (int c = 0; c < NC; ++c) xs[r * NC + c] = bs[r * NC + c] + acc[c];
    __syncthreads();
    if (!substituting) {
      T y[NC];
#pragma unroll
      for (int c = 0; c < NC; ++c) y[c] = T(0);
      tile_product<T, R, NC, true>(Is, xs, y, r, q);
      row_sum<T, R, NC>(y, q);
      if (q == 0 && r < rows)
#pragma unroll
        for (int c = 0; c < NC; ++c)
          if (c < nc) {
            const T v = T(0) - y[c];
            put_tagged(xi + (r * NC + c) * W, v);
            Xp[(row0 + r) * p.x.row + c * p.x.col] = v;
          }
    } else {
      substitute<T, R, NC>(xs, Lr + row0 * p.l.col, p.l, rows, p.conj, p.unit);
      for (int v = tid; v < R * NC; v += kSweepThreads) {
        const int rr = v / NC, c = v % NC;
        if (rr < rows && c < nc) {
          put_tagged(xi + v * W, xs[v]);
          Xp[(row0 + rr) * p.x.row + c * p.x.col] = xs[v];
        }
      }
      __syncthreads();  // (xs is written by the next task)
    }
  }
}

template <typename T, int R, int NC>
hsmaError_t launch_sweep_as(const SweepProblem<T>& p, hsmaStream_t stream) {
  static std::atomic<int> blocks_per_sm[64];
  const size_t smem = sweep_shared_bytes(p);
  const void* kernel = reinterpret_cast<const void*>(&sweep_kernel<T, R, NC>);
  int per_sm = 1;
  if (p.repair == nullptr) {
    const hsmaError_t err = resident_blocks(kernel, kSweepThreads, smem, blocks_per_sm, &per_sm);
    if (err != hsmaSuccess) return err;
  } else if (smem > 48 * 1024) {  // (never below what a solve opted in to: its launches would fail)
    const size_t solving = sweep_shared_bytes(sizeof(T), R, NC, false);
    const size_t optin = solving <= size_t(current_device_info().shared_optin) ? solving : smem;
    const hsmaError_t err =
        hsmaFuncSetAttribute(kernel, hsmaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(optin));
    if (err != hsmaSuccess) {
#if HSMA_HIP
      (void)hsmaGetLastError();  // (an AMD block has its LDS without opting in)
#else
      return err;
#endif
    }
  }
  const int64_t nblk = sweep_blocks(p), npanels = (p.n + NC - 1) / NC;
  const int64_t per_chain = sweep_tasks_before(nblk, p.segment), ntasks = sweep_tasks(p);
  // Resident blocks (more would only wait for a turn); the repair is one block.
  int64_t grid = p.repair != nullptr ? 1 : int64_t(per_sm) * current_device_info().multiprocessors;
  if (grid > ntasks) grid = ntasks;
  if (p.max_blocks > 0 && grid > p.max_blocks) grid = p.max_blocks;
  sweep_kernel<T, R, NC><<<static_cast<unsigned>(grid), kSweepThreads, smem, stream>>>(p, nblk, npanels, per_chain,
                                                                                        ntasks);
  return hsmaGetLastError();
}

// The panel widths built: 1, 2, 4, 8 and kSweepMaxCols (limits.h).
static_assert(kSweepMaxCols == 16, "launch_sweep_rows instantiates panels of up to 16 columns");
template <typename T, int R>
hsmaError_t launch_sweep_rows(const SweepProblem<T>& p, hsmaStream_t stream) {
  switch (p.cols) {
    case 1: return launch_sweep_as<T, R, 1>(p, stream);
    case 2: return launch_sweep_as<T, R, 2>(p, stream);
    case 4: return launch_sweep_as<T, R, 4>(p, stream);
    case 8: return launch_sweep_as<T, R, 8>(p, stream);
    case 16: return launch_sweep_as<T, R, 16>(p, stream);
  }
  return hsmaError_t(1);
}

// The row blocks built (limits.h, sweep_rows_built): 64, and 128 for 4-byte elements.
template <typename T>
hsmaError_t launch_sweep_any(const SweepProblem<T>& p, hsmaStream_t stream) {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return hsmaSuccess;
  if (p.segment < 1 || sweep_tasks(p) >= kMaxLaunchTasks) return hsmaError_t(1);
  static_assert(kSweepRows == 64 && kSweepWideRows == 128, "the row blocks instantiated below");
  if (p.rows == kSweepRows) return launch_sweep_rows<T, kSweepRows>(p, stream);
  if constexpr (sweep_rows_built(kSweepWideRows, sizeof(T))) {
    if (p.rows == kSweepWideRows) return launch_sweep_rows<T, kSweepWideRows>(p, stream);
  }
  return hsmaError_t(1);
}

}  // namespace

template <typename T>
hsmaError_t launch_sweep(const SweepProblem<T>& p, hsmaStream_t stream) {
  if (p.repair != nullptr) return hsmaError_t(1);  // (the repair mode: launch_sweep_repair)
  return launch_sweep_any(p, stream);
}

template <typename T>
hsmaError_t launch_sweep_repair(const SweepProblem<T>& p, hsmaStream_t stream) {
  if (p.repair == nullptr) return hsmaError_t(1);
  return launch_sweep_any(p, stream);
}

template hsmaError_t launch_sweep<float>(const SweepProblem<float>&, hsmaStream_t);
template hsmaError_t launch_sweep<double>(const SweepProblem<double>&, hsmaStream_t);
template hsmaError_t launch_sweep<complex<float>>(const SweepProblem<complex<float>>&, hsmaStream_t);
template hsmaError_t launch_sweep<complex<double>>(const SweepProblem<complex<double>>&, hsmaStream_t);
template hsmaError_t launch_sweep_repair<float>(const SweepProblem<float>&, hsmaStream_t);
template hsmaError_t launch_sweep_repair<double>(const SweepProblem<double>&, hsmaStream_t);
template hsmaError_t launch_sweep_repair<complex<float>>(const SweepProblem<complex<float>>&, hsmaStream_t);
template hsmaError_t launch_sweep_repair<complex<double>>(const SweepProblem<complex<double>>&, hsmaStream_t);

}  // namespace hsma
