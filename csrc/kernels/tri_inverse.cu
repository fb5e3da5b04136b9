// Triangular inverse of small matrices (LAPACK's trtri, batched, orders k <= 64): inv(L) for the
// InverseProblem of trsm_problem.h, reading only L's lower triangle and no identity.
//
// A block takes kMats matrices, padded to an order M of 16, 32 or 64 (identity below and right of
// k). Their triangles are staged in shared memory in the arithmetic type C (in 16-byte loads where
// L's rows are contiguous and aligned, as in fla's [B, T, H, BT] layout, so that enough bytes are
// in flight to feed the SM; element by element otherwise), then thread j of a
// matrix solves L x = e_j for column j of the inverse by forward substitution, x in registers
// (every loop unrolled, so indices are static): row i needs L(i, 0..i-1), read by all threads of
// the matrix at once (a broadcast), and the sums are split over four accumulators for latency.
// Entries above the diagonal are exactly zero; a warp whose columns all start at jw skips the
// rows and the products that involve only those zeros (M = 64 on 32-lane warps: the second warp
// does about a quarter of the first's products). Column j is written as the matrix's threads
// read their rows, so a row-major inverse is written in rows of consecutive addresses.
#include "trsm_problem.h"

namespace hsma {
namespace {

template <typename C> __host__ __device__ constexpr int inverse_threads() { return sizeof(C) == 8 ? 64 : 128; }

// Element (i, l) of a staged matrix: L's where the triangle holds it, the identity elsewhere.
template <typename C, typename S>
__device__ inline C staged(S v, int i, int l, int k, bool unit) {
  return i < k && (l < i || (l == i && !unit)) ? to_compute<C>(v) : C(i == l ? 1 : 0);
}

// Stages the block's kMats matrices into Ls (row-major, order M). vec: L's rows are contiguous, k and
// every offset are multiples of Vec16's length and L is 16-byte aligned (the host checks); then each
// 16-byte piece of a row that holds part of the triangle is one load, and pieces above it none.
template <typename C, typename S, int M, int kMats, int kThreads, typename O>
__device__ inline void stage(const InverseProblem<S, O>& p, int64_t b0, const int64_t (*offs)[2], C* Ls,
                             bool l_rows_fastest, bool vec) {
  const int t = static_cast<int>(threadIdx.x), k = static_cast<int>(p.k);
  if (vec) {
    constexpr int V = Vec16<S>::kLen, kPer = M / V;  // pieces per row (M >= 16 >= V)
    constexpr int kUnroll = 16 / V;                  // 64 bytes in flight per thread and pass (no spills)
#pragma unroll kUnroll
    for (int e = t; e < kMats * M * kPer; e += kThreads) {
      const int gg = e / (M * kPer), i = (e / kPer) % M, l0 = (e % kPer) * V;
      Vec16<S> w{};
      if (b0 + gg < p.batch && i < k && l0 < k && (l0 < i || (l0 == i && !p.unit)))
        w = *reinterpret_cast<const Vec16<S>*>(p.L + offs[gg][0] + i * p.l.row + l0);
      C* dst = Ls + gg * M * M + i * M + l0;
#pragma unroll
      for (int u = 0; u < V; ++u) dst[u] = staged<C>(w.v[u], i, l0 + u, k, p.unit);
    }
    return;
  }
  // Element by element, walked along L's contiguous direction.
#pragma unroll 4
  for (int e = t; e < kMats * M * M; e += kThreads) {
    const int gg = e / (M * M), a = (e / M) % M, c = e % M;
    const int i = l_rows_fastest ? c : a, l = l_rows_fastest ? a : c;
    S v{};
    if (b0 + gg < p.batch && i < k && (l < i || (l == i && !p.unit))) v = p.L[offs[gg][0] + i * p.l.row + l * p.l.col];
    Ls[gg * M * M + i * M + l] = staged<C>(v, i, l, k, p.unit);
  }
}

template <typename S, typename O, int M>
__global__ void __launch_bounds__(inverse_threads<typename compute_of<S>::type>())
tri_inverse_kernel(InverseProblem<S, O> p, bool l_rows_fastest, bool vec) {
  using C = typename compute_of<S>::type;
  constexpr int kThreads = inverse_threads<C>();
  constexpr int kMats = kThreads / M;
  __shared__ __align__(16) C Ls[kMats * M * M];
  __shared__ int64_t offs[kMats][2];
  const int t = static_cast<int>(threadIdx.x), g = t / M, j = t % M;
  // The first column of this warp's matrix columns: x(0 .. jw) is zero in all of them.
  const int jw = M > kWarpSize ? j / kWarpSize * kWarpSize : 0;
  const int k = static_cast<int>(p.k);
  const int64_t ntasks = (p.batch + kMats - 1) / kMats;

  for (int64_t task = blockIdx.x; task < ntasks; task += gridDim.x) {
    const int64_t b0 = task * kMats;
    if (t < kMats) {
      int64_t off[3];
      batch_offsets(p.bl, b0 + t < p.batch ? b0 + t : 0, off);
      offs[t][0] = off[0];
      offs[t][1] = off[2];
    }
    __syncthreads();
    stage<C, S, M, kMats, kThreads>(p, b0, offs, Ls, l_rows_fastest, vec);
    __syncthreads();

    const C* Lg = Ls + g * M * M;
    C x[M];
#pragma unroll
    for (int i = 0; i < M; ++i) {
      if (i < jw) {  // warp-uniform
        x[i] = C(0);
        continue;
      }
      const C* row = Lg + i * M;
      C acc[4] = {C(i == j ? 1 : 0), C(0), C(0), C(0)};
#pragma unroll
      for (int c0 = 0; c0 < i; c0 += kWarpSize) {
        if (c0 + kWarpSize <= jw) continue;  // warp-uniform: x(c0 .. c0 + 32) is zero here
#pragma unroll
        for (int l = c0; l < i && l < c0 + kWarpSize; ++l) acc[l & 3] = fms(acc[l & 3], row[l], x[l]);
      }
      const C sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
      // Above the diagonal stays exactly zero, whatever the pivots (no 0 / 0 there).
      x[i] = i < j ? C(0) : (p.unit ? sum : sum / row[i]);
    }

    if (b0 + g < p.batch && j < k) {
      O* X = p.X + offs[g][1] + j * p.x.col;
#pragma unroll
      for (int i = 0; i < M; ++i)
        if (i < k) X[i * p.x.row] = from_compute<O>(x[i]);
    }
    __syncthreads();  // before the next task restages
  }
}

template <typename S, typename O, int M>
hsmaError_t launch_order(const InverseProblem<S, O>& p, hsmaStream_t stream) {
  constexpr int kThreads = inverse_threads<typename compute_of<S>::type>();
  const int64_t tasks = (p.batch + kThreads / M - 1) / (kThreads / M);
  const unsigned grid = small_grid(p, tasks);
  // Stage along L's contiguous direction: down the columns when its rows are the closer together.
  const bool rows_fastest = (p.l.row < 0 ? -p.l.row : p.l.row) < (p.l.col < 0 ? -p.l.col : p.l.col);
  constexpr int V = Vec16<S>::kLen;
  bool vec = p.l.col == 1 && p.k % V == 0 && p.l.row % V == 0 && reinterpret_cast<uintptr_t>(p.L) % 16 == 0;
  for (int d = 0; d < p.bl.ndim; ++d) vec = vec && p.bl.stride[0][d] % V == 0;
  tri_inverse_kernel<S, O, M><<<grid, kThreads, 0, stream>>>(p, rows_fastest, vec);
  return hsmaGetLastError();
}

}  // namespace

template <typename S, typename O>
hsmaError_t launch_tri_inverse(const InverseProblem<S, O>& p, hsmaStream_t stream) {
  if (p.k <= 0 || p.batch <= 0) return hsmaSuccess;
  if (p.k <= 16) return launch_order<S, O, 16>(p, stream);
  if (p.k <= 32) return launch_order<S, O, 32>(p, stream);
  if (p.k <= kInverseMaxK) return launch_order<S, O, 64>(p, stream);
  return hsmaError_t(1);
}

// float32 and the 16-bit types, each to each (arithmetic in float); float64 to float64.
#define HSMA_INVERSE(S, O) template hsmaError_t launch_tri_inverse<S, O>(const InverseProblem<S, O>&, hsmaStream_t);
#define HSMA_INVERSE_FROM(S) HSMA_INVERSE(S, float) HSMA_INVERSE(S, bfloat16_bits) HSMA_INVERSE(S, float16_bits)
HSMA_INVERSE_FROM(float)
HSMA_INVERSE_FROM(bfloat16_bits)
HSMA_INVERSE_FROM(float16_bits)
HSMA_INVERSE(double, double)
#undef HSMA_INVERSE_FROM
#undef HSMA_INVERSE

}  // namespace hsma
