// CUDA kernel of torch.ops.hsma._lu_permutation: the pivots' permutation by kernels/permutation.cu, one
// block per batch entry; orders above kPermutationMaxK and batches above kPermutationMaxBatch by ATen
// (lu_permutation_by_unpack).
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "cuda/canonical.h"
#include "ops/solvers.h"
#include "trsm.h"

namespace hsma {
namespace {

at::Tensor lu_permutation_cuda(const at::Tensor& pivots, bool inverse) {
  check_pivots(pivots);
  const int64_t k = pivots.size(-1), batch = k == 0 ? 0 : pivots.numel() / k;
  if (k > kPermutationMaxK || batch > kPermutationMaxBatch) return lu_permutation_by_unpack(pivots, inverse);
  const c10::cuda::CUDAGuard guard(pivots.device());
  const at::Tensor piv = pivots.contiguous();
  at::Tensor out = at::empty(pivots.sizes(), pivots.options().dtype(at::kLong));
  check_launch(launch_lu_permutation(piv.const_data_ptr<int32_t>(), batch, k, out.mutable_data_ptr<int64_t>(),
                                     inverse, c10::cuda::getCurrentCUDAStream()),
               "launching the permutation kernel");
  return out;
}

}  // namespace
}  // namespace hsma

TORCH_LIBRARY_IMPL(hsma, CUDA, m) { m.impl("_lu_permutation", &hsma::lu_permutation_cuda); }
