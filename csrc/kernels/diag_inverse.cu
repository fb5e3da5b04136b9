// Diagonal-block inversion for the blocked TRSM (the HSMA-TRSM paper's decoupled scheme).
//
// Every NB x NB diagonal block D of the triangular matrix is inverted independently: a thread
// block takes one (batch entry, diagonal block, panel of IB columns of inv(D)) task. Column j of
// inv(D) is the solution of D x = e_j, so the panel is a small TRSM against an identity tile,
// solved by column-oriented substitution:
//   - thread r owns row r of the panel (IB values in registers);
//   - at step c the thread owning row c divides by D(c, c) and publishes its IB solved values in
//     shared memory; every thread r > c subtracts D(r, c) times them;
//   - the columns of D a thread needs are fetched 4-8 steps ahead into a register ring while the
//     current step computes (the paper's double buffering, moved to registers: each thread only
//     ever needs its own row's element of a column), and the published row alternates between
//     two shared-memory buffers, so each step needs a single barrier.
// Shared memory is 2 * IB elements: O(IB), not the O(IB^2) of the fused kernels, so NB can grow
// to 1024 for every data type (complex128 included).
//
// Reads are made coalesced by choosing which of D and D^T to invert: the kernel inverts a lower
// triangular D' whose columns are contiguous in memory (D' is D, D^T, or one of them read
// backwards for an upper D) and writes inv(D) through the matching index map.
#include "trsm_problem.h"

namespace hsma {
namespace {

inline int64_t iabs(int64_t v) { return v < 0 ? -v : v; }

template <typename T>
__global__ void __launch_bounds__(1024)
diag_inverse_kernel(DiagInverseProblem<T> p, int64_t nblk, int64_t npanels, bool transpose) {
  constexpr int kPanel = diag_inverse_panel<T>();
  constexpr int kAhead = sizeof(T) >= 8 && sizeof(T) != 8 ? 4 : 8;  // columns of D' in flight per thread
  __shared__ T xs[2][kPanel];
  const int nb = static_cast<int>(p.nb);
  const int r = static_cast<int>(threadIdx.x);
  const bool flip = p.upper != transpose;  // D' is lower only when read backwards
  const int64_t ntasks = p.batch * nblk * npanels;

  for (int64_t task = blockIdx.x; task < ntasks; task += gridDim.x) {
    const int64_t bidx = task / (nblk * npanels);
    const int64_t k = (task / npanels) % nblk;
    const int j0 = static_cast<int>(task % npanels) * kPanel;
    const int64_t k0 = k * p.nb;
    const int sz = static_cast<int>(p.m - k0 < p.nb ? p.m - k0 : p.nb);

    // D'(i, j) = Dv[i * dr + j * dc], with D the diagonal block of A.
    int64_t dr = transpose ? p.a.col : p.a.row, dc = transpose ? p.a.row : p.a.col;
    const T* Dv = p.A + bidx * p.a_batch_stride + k0 * (p.a.row + p.a.col);
    if (flip) {
      Dv += (sz - 1) * (p.a.row + p.a.col);
      dr = -dr;
      dc = -dc;
    }
    T* O = p.out + bidx * p.out_batch_stride + k * p.out_block_stride;
    const int64_t pitch = p.out_pitch;

    T x[kPanel];
#pragma unroll
    for (int jj = 0; jj < kPanel; ++jj) x[jj] = T(r == j0 + jj ? 1 : 0);
    const bool row_ok = r < sz;
    const T dself = (row_ok && !p.unit) ? conj_if(Dv[r * dr + r * dc], p.conj) : T(1);
    const T rself = pivot_reciprocal(dself);  // off the critical path: each thread its own pivot

    if (j0 < sz) {
      // Column c of D' for this thread's row, kAhead steps ahead: each chunk of kAhead columns
      // is fetched (coalesced across the block) while the previous chunk is being used.
      T ring[kAhead];
#pragma unroll
      for (int u = 0; u < kAhead; ++u) {
        const int c = j0 + u;
        ring[u] = (r > c && row_ok && c < sz) ? conj_if(Dv[r * dr + c * dc], p.conj) : T(0);
      }
      for (int c0 = j0; c0 < sz; c0 += kAhead) {
#pragma unroll
        for (int u = 0; u < kAhead; ++u) {
          const int c = c0 + u;
          if (c < sz) {  // uniform across the block
            if (r == c) {
#pragma unroll
              for (int jj = 0; jj < kPanel; ++jj) {
                // Columns right of c are still exactly zero in this row: leave them so, so that a
                // zero pivot (0 / 0) cannot reach entries that do not depend on it.
                if (!p.unit && j0 + jj <= c) x[jj] = divide_by_pivot(x[jj], dself, rself);
                xs[c & 1][jj] = x[jj];
              }
            }
            __syncthreads();
            if (r > c && row_ok) {
#pragma unroll
              for (int jj = 0; jj < kPanel; ++jj) x[jj] = fms(x[jj], ring[u], xs[c & 1][jj]);
            }
          }
          const int cn = c + kAhead;  // refill this slot kAhead steps ahead
          ring[u] = (r > cn && row_ok && cn < sz) ? conj_if(Dv[r * dr + cn * dc], p.conj) : T(0);
        }
      }
    }

    bool bad = false;
    if (r < nb) {
#pragma unroll
      for (int jj = 0; jj < kPanel; ++jj) {
        const int col = j0 + jj;
        if (col >= nb) break;
        if (row_ok && col < sz) {
          int R = flip ? sz - 1 - r : r, C = flip ? sz - 1 - col : col;
          if (transpose) { const int t = R; R = C; C = t; }
          O[R * pitch + C] = x[jj];
          bad = bad || inaccurate(x[jj]);
        } else {
          O[r * pitch + col] = T(0);
        }
      }
    }
    const bool any_bad = __syncthreads_or(bad);  // (also the barrier before the next task reuses xs)
    if (r == 0 && p.inaccurate != nullptr) p.inaccurate[task] = any_bad ? 1 : 0;
  }
}

}  // namespace

template <typename T>
hsmaError_t launch_diag_inverse(const DiagInverseProblem<T>& p, hsmaStream_t stream) {
  if (p.m <= 0 || p.batch <= 0) return hsmaSuccess;
  if (p.nb <= 0 || p.nb > kDiagInverseMaxNB) return hsmaError_t(1);
  const int64_t nblk = (p.m + p.nb - 1) / p.nb;
  const int64_t npanels = (p.nb + diag_inverse_panel<T>() - 1) / diag_inverse_panel<T>();
  const int64_t ntasks = diag_inverse_tasks(p);
  // Invert D^T instead of D when that makes the columns the kernel walks contiguous.
  const bool transpose = iabs(p.a.col) < iabs(p.a.row);
  const int warp = current_device_info().warp_size;
  const int threads = static_cast<int>((p.nb + warp - 1) / warp * warp);
  const unsigned grid = static_cast<unsigned>(ntasks < 0x7fffffff ? ntasks : 0x7fffffff);
  diag_inverse_kernel<T><<<grid, threads, 0, stream>>>(p, nblk, npanels, transpose);
  return hsmaGetLastError();
}

template hsmaError_t launch_diag_inverse<float>(const DiagInverseProblem<float>&, hsmaStream_t);
template hsmaError_t launch_diag_inverse<double>(const DiagInverseProblem<double>&, hsmaStream_t);
template hsmaError_t launch_diag_inverse<complex<float>>(const DiagInverseProblem<complex<float>>&, hsmaStream_t);
template hsmaError_t launch_diag_inverse<complex<double>>(const DiagInverseProblem<complex<double>>&, hsmaStream_t);

}  // namespace hsma
