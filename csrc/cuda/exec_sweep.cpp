// The sweep executor (exec.h): one launch of the sweep kernel (kernels/sweep.cu) after zeroing its workspace.
#include <c10/cuda/CUDAStream.h>

#include "cuda/canonical.h"
#include "cuda/exec.h"

namespace hsma {

template <typename S>
void exec_sweep(const at::Tensor& A, const at::Tensor& B, at::Tensor& X, const TrsmArgs& args, const TrsmShape& s,
                const SweepPlan& plan, int64_t max_blocks) {
  using K = typename kernel_type<S>::type;
  Batched3 v = batched_3d(A, B, X, s);
  SweepProblem<K> p = sweep_problem<K>(v.A3, v.B3, v.X3, args);
  p.rows = plan.rows;
  p.cols = plan.cols;
  p.segment = plan.segment;
  p.max_blocks = max_blocks;
  HSMA_CHECK(sweep_tasks(p) < kMaxLaunchTasks && sweep_fits(p),
             "hsma::trsm: internal error: the sweep's plan does not fit its launch");
  const auto stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor work = at::empty({sweep_workspace_words(p)}, v.A3.options().dtype(at::kLong));
  check_launch(cudaMemsetAsync(work.data_ptr(), 0, work.nbytes(), stream), "zeroing the sweep's workspace");
  p.work = reinterpret_cast<unsigned long long*>(work.data_ptr());
  check_launch(launch_sweep<K>(p, stream), "launching the sweep kernel");
}

#define HSMA_INSTANTIATE(S)                                                                                      \
  template void exec_sweep<S>(const at::Tensor&, const at::Tensor&, at::Tensor&, const TrsmArgs&, const TrsmShape&, \
                              const SweepPlan&, int64_t);
HSMA_FOR_EACH_DTYPE(HSMA_INSTANTIATE)
#undef HSMA_INSTANTIATE

}  // namespace hsma
