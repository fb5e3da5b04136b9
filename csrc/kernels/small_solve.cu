// Small-scale direct solve (the HSMA-TRSM paper's small regime, m <= 64): L X = alpha B with the
// whole triangle of L in shared memory. Two kernels of one family, chosen by the launcher:
//
// 1. Column kernel (a column of X per thread, in registers), for batches and wide B when
//    M * sizeof(T) <= 512 bytes (every dtype at m <= 32; float32, float64 and complex64 up to
//    m = 64). The order is rounded up to a compile-time M in {8, 16, 32, 48, 64} (L padded with
//    identity), so the substitution is fully unrolled over registers: for each k,
//    x_k = x_k / L(k, k), then x_i -= L(i, k) x_k for i > k, with L(:, k) read from shared memory
//    as a broadcast (every lane reads the same address; consecutive i vectorise). Several
//    (matrix, column tile) tasks share a block when the tiles are narrow, so batches of tiny
//    systems keep every lane busy.
//
// 2. Segment kernel, for a few columns of a large triangle (a single solve) and for complex128
//    at 32 < m <= 64:
//   - a thread block takes one (batch entry, column tile) task at a time (grid-stride loop, so
//     any batch size and any n fit in a 1-D grid);
//   - L's lower triangle is stored packed, column by column, in shared memory: column k holds
//     rows k..m-1, so lanes reading L(i, k) for consecutive i hit consecutive words (no bank
//     conflicts) and a 64x64 complex128 triangle needs 33 KB, inside every vendor's budget;
//   - a warp is cut into segments of S lanes (S = the power of two >= m, at most the warp width);
//     a segment owns one column of B, lane l holding rows l, l + S, ... in registers (RPL rows);
//   - column-oriented forward substitution: at step k the lane holding row k divides by L(k, k),
//     the value is broadcast to the segment with a shuffle, and every lane updates its rows below k.
//     No __syncthreads inside the solve.
//
// Both take the division off the critical path: each pivot's reciprocal is computed once per
// matrix while the triangle is loaded, and x_k is multiplied by it, unless only a true division
// is exact enough there (zero, subnormal, huge or non-finite pivots; see pivot_reciprocal).
#include "trsm_problem.h"

namespace hsma {
namespace {

constexpr int kSmallThreads = 256;
constexpr int kColumnThreads = 128;
constexpr int kColumnMaxBytes = 512;  // M * sizeof(T) for the column kernel's registers
constexpr int kLoadUnroll = 8;
constexpr int64_t kFewColumns = 2048;  // batch * n at or below which m > 32 takes the segment kernel

template <typename T, int M>
__global__ void __launch_bounds__(kColumnThreads)
small_solve_columns_kernel(SolveProblem<T> p, int tc, int64_t ntiles) {
  extern __shared__ unsigned char smem_raw[];
  const int groups = static_cast<int>(blockDim.x) / tc;
  const int g = static_cast<int>(threadIdx.x) / tc, t = static_cast<int>(threadIdx.x) % tc;
  T* Ls = reinterpret_cast<T*>(smem_raw) + g * (M * M + M);  // column-major: Ls[k * M + i] = L(i, k)
  T* Rs = Ls + M * M;                                          // Rs[k] = pivot_reciprocal(L(k, k))
  const int m = static_cast<int>(p.m);
  const bool k_fast = (p.l.col < 0 ? -p.l.col : p.l.col) <= (p.l.row < 0 ? -p.l.row : p.l.row);
  const int64_t ntasks = p.batch * ntiles;

  for (int64_t base = int64_t(blockIdx.x) * groups; base < ntasks; base += int64_t(gridDim.x) * groups) {
    const int64_t task = base + g;
    const bool has_task = task < ntasks;
    const int64_t bidx = has_task ? task / ntiles : 0, tile = has_task ? task % ntiles : 0;
    int64_t off[3];
    batch_offsets(p.bl, bidx, off);

    __syncthreads();  // the previous task is done with Ls
    if (has_task) {
      // kLoadUnroll independent loads in flight per thread before any is stored.
      const T* L = p.L + off[0];
      for (int e0 = t; e0 < M * M; e0 += tc * kLoadUnroll) {
        T v[kLoadUnroll];
#pragma unroll
        for (int u = 0; u < kLoadUnroll; ++u) {
          const int e = e0 + u * tc;
          const int i = k_fast ? e / M : e % M, k = k_fast ? e % M : e / M;
          v[u] = T(i == k ? 1 : 0);  // padding beyond m: identity
          if (e < M * M && i < m && k < m && (i > k || (i == k && !p.unit)))
            v[u] = conj_if(L[i * p.l.row + k * p.l.col], p.conj);
        }
#pragma unroll
        for (int u = 0; u < kLoadUnroll; ++u) {
          const int e = e0 + u * tc;
          const int i = k_fast ? e / M : e % M, k = k_fast ? e % M : e / M;
          if (e < M * M) Ls[k * M + i] = v[u];
        }
      }
    }
    __syncthreads();
    if (has_task && !p.unit) {
      for (int k = t; k < M; k += tc) Rs[k] = pivot_reciprocal(Ls[k * M + k]);
    }
    __syncthreads();

    const int64_t j = tile * tc + t;
    const bool active = has_task && j < p.n;
    const T* B = p.B + off[1] + j * p.b.col;
    T x[M];
#pragma unroll
    for (int r = 0; r < M; ++r) x[r] = (active && r < m) ? p.alpha * B[r * p.b.row] : T(0);
#pragma unroll
    for (int k = 0; k < M; ++k) {
      if (!p.unit) x[k] = divide_by_pivot(x[k], Ls[k * M + k], Rs[k]);
#pragma unroll
      for (int i = k + 1; i < M; ++i) x[i] = fms(x[i], Ls[k * M + i], x[k]);
    }
    if (active) {
      T* X = p.X + off[2] + j * p.x.col;
#pragma unroll
      for (int r = 0; r < M; ++r)
        if (r < m) X[r * p.x.row] = x[r];
    }
  }
}

template <typename T, int M>
hsmaError_t launch_columns(const SolveProblem<T>& p, const DeviceInfo& dev, hsmaStream_t stream) {
  // Threads per task: the columns of B rounded up to warps, at most the block; narrower (more
  // tasks, each re-reading L) while the grid would leave multiprocessors idle.
  int64_t tc = (p.n + dev.warp_size - 1) / dev.warp_size * dev.warp_size;
  if (tc > kColumnThreads) tc = kColumnThreads;
  while (tc > dev.warp_size && p.batch * ((p.n + tc - 1) / tc) < dev.multiprocessors) tc /= 2;
  const int64_t per_matrix_bytes = int64_t(M) * (M + 1) * sizeof(T);
  const int64_t ntiles = (p.n + tc - 1) / tc;
  const int64_t ntasks = p.batch * ntiles;
  int64_t groups = kColumnThreads / tc;
  while (groups > 1 && groups * per_matrix_bytes > kSharedBudgetBytes) groups /= 2;
  while (groups > 1 && ntasks / groups < dev.multiprocessors) groups /= 2;  // spread few tasks over SMs
  const int64_t blocks = (ntasks + groups - 1) / groups;
  const unsigned grid = static_cast<unsigned>(blocks < 0x7fffffff ? blocks : 0x7fffffff);
  small_solve_columns_kernel<T, M><<<grid, static_cast<unsigned>(groups * tc), groups * per_matrix_bytes, stream>>>(
      p, static_cast<int>(tc), ntiles);
  return hsmaGetLastError();
}
constexpr int kPackedMax = int(kSmallMaxM * (kSmallMaxM + 1) / 2);

__host__ __device__ inline int packed_start(int k, int m) { return k * m - (k * (k - 1)) / 2; }

template <typename T, int RPL>
__global__ void __launch_bounds__(kSmallThreads)
small_solve_kernel(SolveProblem<T> p, int seg_w, int64_t tile_cols, int64_t ntiles) {
  __shared__ T Ls[kPackedMax];
  __shared__ T Rs[kSmallMaxM];  // pivot reciprocals
  const int m = static_cast<int>(p.m);
  const int tid = static_cast<int>(threadIdx.x);
  const int nthreads = static_cast<int>(blockDim.x);
  const int nseg = nthreads / seg_w;
  const int seg = tid / seg_w, lane = tid % seg_w;
  // Consecutive threads walk the dimension of L with the smaller stride (coalesced loads).
  const bool k_fast = (p.l.col < 0 ? -p.l.col : p.l.col) <= (p.l.row < 0 ? -p.l.row : p.l.row);
  const int64_t ntasks = p.batch * ntiles;

  for (int64_t task = blockIdx.x; task < ntasks; task += gridDim.x) {
    const int64_t bidx = task / ntiles, tile = task % ntiles;
    int64_t off[3];
    batch_offsets(p.bl, bidx, off);
    const T* L = p.L + off[0];
    const T* B = p.B + off[1];
    T* X = p.X + off[2];

    __syncthreads();  // the previous task is done with Ls
    for (int e0 = tid; e0 < m * m; e0 += nthreads * kLoadUnroll) {
      T v[kLoadUnroll];  // independent loads in flight before any is stored
#pragma unroll
      for (int u = 0; u < kLoadUnroll; ++u) {
        const int e = e0 + u * nthreads;
        const int i = k_fast ? e / m : e % m, k = k_fast ? e % m : e / m;
        if (e < m * m && (i > k || (i == k && !p.unit))) v[u] = conj_if(L[i * p.l.row + k * p.l.col], p.conj);
      }
#pragma unroll
      for (int u = 0; u < kLoadUnroll; ++u) {
        const int e = e0 + u * nthreads;
        const int i = k_fast ? e / m : e % m, k = k_fast ? e % m : e / m;
        if (e < m * m && (i > k || (i == k && !p.unit))) Ls[packed_start(k, m) + (i - k)] = v[u];
      }
    }
    __syncthreads();
    if (!p.unit) {
      for (int k = tid; k < m; k += nthreads) Rs[k] = pivot_reciprocal(Ls[packed_start(k, m)]);
    }
    __syncthreads();

    const int64_t j_end = (tile + 1) * tile_cols < p.n ? (tile + 1) * tile_cols : p.n;
    for (int64_t j0 = tile * tile_cols; j0 < j_end; j0 += nseg) {
      const int64_t j = j0 + seg;
      const bool active = j < j_end;
      T b[RPL];
#pragma unroll
      for (int s = 0; s < RPL; ++s) {
        const int r = lane + s * seg_w;
        b[s] = (active && r < m) ? p.alpha * B[r * p.b.row + j * p.b.col] : T(0);
      }
#pragma unroll
      for (int s = 0; s < RPL; ++s) {
        const int k_end = (m - s * seg_w) < seg_w ? (m - s * seg_w) : seg_w;
        int cs = packed_start(s * seg_w, m);  // packed start of column k
        for (int kk = 0; kk < k_end; ++kk) {
          const int k = s * seg_w + kk;
          T xk = b[s];
          if (!p.unit) xk = divide_by_pivot(xk, Ls[cs], Rs[k]);
          xk = shfl(xk, kk, seg_w);
          if (lane == kk) b[s] = xk;
          const T* col = Ls + cs - k;  // col[i] = L(i, k) for i >= k
#pragma unroll
          for (int t = s; t < RPL; ++t) {
            const int i = lane + t * seg_w;
            if (i > k && i < m) b[t] = fms(b[t], col[i], xk);
          }
          cs += m - k;
        }
      }
#pragma unroll
      for (int s = 0; s < RPL; ++s) {
        const int r = lane + s * seg_w;
        if (active && r < m) X[r * p.x.row + j * p.x.col] = b[s];
      }
    }
  }
}

}  // namespace

template <typename T>
hsmaError_t launch_small_solve(const SolveProblem<T>& p, hsmaStream_t stream) {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return hsmaSuccess;
  if (p.m > kSmallMaxM) return hsmaError_t(1);
  const DeviceInfo dev = current_device_info();
  // A few columns of a large triangle (a single solve): the segment kernel spreads each column's
  // substitution over a warp's lanes, the column kernel would run it on one thread.
  const bool few_columns = p.m > 32 && p.batch * p.n <= kFewColumns;
  if (p.kernel == SmallKernel::kColumns || (p.kernel == SmallKernel::kAuto && !few_columns)) {
    if (p.m <= 8) return launch_columns<T, 8>(p, dev, stream);
    if (p.m <= 16) return launch_columns<T, 16>(p, dev, stream);
    if (p.m <= 32) return launch_columns<T, 32>(p, dev, stream);
    if constexpr (48 * sizeof(T) <= kColumnMaxBytes) {
      if (p.m <= 48) return launch_columns<T, 48>(p, dev, stream);
    }
    if constexpr (64 * sizeof(T) <= kColumnMaxBytes) {
      if (p.m <= 64) return launch_columns<T, 64>(p, dev, stream);
    }
  }
  int seg_w = 1;
  while (seg_w < p.m && seg_w < dev.warp_size) seg_w *= 2;
  const int rpl = static_cast<int>((p.m + seg_w - 1) / seg_w);
  const int nseg = kSmallThreads / seg_w;
  // Columns per task: one pass of all segments; more passes only while the grid stays full.
  const int64_t sms = dev.multiprocessors;
  int64_t passes = 1;
  const int64_t n_pass = (p.n + nseg - 1) / nseg;
  while (passes < 8 && passes < n_pass && p.batch * ((n_pass + 2 * passes - 1) / (2 * passes)) >= 4 * sms)
    passes *= 2;
  const int64_t tile_cols = nseg * passes;
  const int64_t ntiles = (p.n + tile_cols - 1) / tile_cols;
  const int64_t ntasks = p.batch * ntiles;
  const unsigned grid = static_cast<unsigned>(ntasks < 0x7fffffff ? ntasks : 0x7fffffff);
  if (rpl == 1)
    small_solve_kernel<T, 1><<<grid, kSmallThreads, 0, stream>>>(p, seg_w, tile_cols, ntiles);
  else if (rpl == 2)
    small_solve_kernel<T, 2><<<grid, kSmallThreads, 0, stream>>>(p, seg_w, tile_cols, ntiles);
  else
    return hsmaError_t(1);
  return hsmaGetLastError();
}

template hsmaError_t launch_small_solve<float>(const SolveProblem<float>&, hsmaStream_t);
template hsmaError_t launch_small_solve<double>(const SolveProblem<double>&, hsmaStream_t);
template hsmaError_t launch_small_solve<complex<float>>(const SolveProblem<complex<float>>&, hsmaStream_t);
template hsmaError_t launch_small_solve<complex<double>>(const SolveProblem<complex<double>>&, hsmaStream_t);

}  // namespace hsma
