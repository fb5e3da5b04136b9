// Small-scale direct solve (the HSMA-TRSM paper's small regime, m <= 64): L X = alpha B with the
// whole triangle of L in shared memory, one right-hand-side column per lane segment.
//
// Layout of the work:
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
#include "trsm_problem.h"

namespace hsma {
namespace {

constexpr int kSmallThreads = 256;
constexpr int kPackedMax = int(kSmallMaxM * (kSmallMaxM + 1) / 2);

__host__ __device__ inline int packed_start(int k, int m) { return k * m - (k * (k - 1)) / 2; }

template <typename T, int RPL>
__global__ void __launch_bounds__(kSmallThreads)
small_solve_kernel(SolveProblem<T> p, int seg_w, int64_t tile_cols, int64_t ntiles) {
  __shared__ T Ls[kPackedMax];
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
    for (int e = tid; e < m * m; e += nthreads) {
      const int i = k_fast ? e / m : e % m;
      const int k = k_fast ? e % m : e / m;
      if (i > k || (i == k && !p.unit))
        Ls[packed_start(k, m) + (i - k)] = conj_if(L[i * p.l.row + k * p.l.col], p.conj);
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
          if (!p.unit) xk = xk / Ls[cs];
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
