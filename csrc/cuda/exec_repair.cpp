// The blocked path's repair (exec.h): the sweep kernel's repair mode (kernels/sweep.cu), one block, with the panel
// width the planner chose (BlockPlan::repair_cols).
#include <c10/cuda/CUDAStream.h>

#include <algorithm>

#include "cuda/canonical.h"
#include "cuda/exec.h"

namespace hsma {

template <typename S>
void exec_repair(const at::Tensor& A3, const at::Tensor& B3, at::Tensor& X3, const TrsmArgs& args,
                 const at::Tensor& inaccurate, int cols) {
  using K = typename kernel_type<S>::type;
  SweepProblem<K> p = sweep_problem<K>(A3, B3, X3, args);
  p.segment = static_cast<int>(std::min<int64_t>(sweep_blocks(p), 1 << 30));  // one task per row block
  p.repair = inaccurate.data_ptr<int>();
  p.repair_count = inaccurate.numel();
  p.cols = cols;
  HSMA_CHECK(sweep_tasks(p) < kMaxLaunchTasks && sweep_fits(p),
             "hsma::trsm: internal error: the repair's plan does not fit its launch");
  p.repair_per_entry = inaccurate.numel() / A3.size(0);  // (the inversion's tasks, batch entry outermost)
  const at::Tensor work = at::empty({sweep_workspace_words(p)}, A3.options().dtype(at::kLong));  // zeroed if used
  p.work = reinterpret_cast<unsigned long long*>(work.data_ptr());
  check_launch(launch_sweep_repair<K>(p, c10::cuda::getCurrentCUDAStream()), "launching the repair sweep");
}

#define HSMA_INSTANTIATE(S)                                                                            \
  template void exec_repair<S>(const at::Tensor&, const at::Tensor&, at::Tensor&, const TrsmArgs&, \
                               const at::Tensor&, int);
HSMA_FOR_EACH_DTYPE(HSMA_INSTANTIATE)
#undef HSMA_INSTANTIATE

}  // namespace hsma
