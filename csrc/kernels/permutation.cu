// LAPACK's row interchanges as one permutation vector, batched (for lu_solve): pivots ipiv (1-based,
// k per batch entry, as torch.linalg.lu_factor returns them) applied in order to 0..k-1.
//
// A block per batch entry: the pivots and the permutation are staged in shared memory, one thread applies
// the k interchanges in order (each reads where the one before may have written), and the block writes
// perm (P[perm[j], j] = 1 for A = P L U) or its inverse. An interchange with a row outside 0..k-1 (not a
// LAPACK pivot) is skipped.
#include "trsm_problem.h"

namespace hsma {
namespace {

constexpr int kPermutationThreads = 128;

__global__ void __launch_bounds__(kPermutationThreads)
    lu_permutation_kernel(const int32_t* pivots, int64_t* out, int k, bool inverse) {
  extern __shared__ int32_t staged[];  // perm[k], then the 0-based pivots[k]
  int32_t* perm = staged;
  int32_t* piv = staged + k;
  const int64_t b = blockIdx.x;
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    perm[i] = i;
    piv[i] = pivots[b * k + i] - 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 0; i < k; ++i) {
      const int j = piv[i];
      if (j != i && j >= 0 && j < k) {
        const int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    if (inverse) {
      out[b * k + perm[i]] = i;
    } else {
      out[b * k + i] = perm[i];
    }
  }
}

}  // namespace

hsmaError_t launch_lu_permutation(const int32_t* pivots, int64_t batch, int64_t k, int64_t* out, bool inverse,
                                  hsmaStream_t stream) {
  if (batch <= 0 || k <= 0) return hsmaSuccess;
  if (k > kPermutationMaxK || batch > kPermutationMaxBatch) return hsmaError_t(1);
  const size_t shared = 2 * size_t(k) * sizeof(int32_t);
  lu_permutation_kernel<<<unsigned(batch), kPermutationThreads, shared, stream>>>(pivots, out, int(k), inverse);
  return hsmaGetLastError();
}

}  // namespace hsma
