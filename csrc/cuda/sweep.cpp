// The sweep's host side (sweep.h).
#include "cuda/sweep.h"

#include <c10/cuda/CUDAStream.h>

#include "cuda/canonical.h"

namespace hsma {
namespace {

// The canonical problem (L lower, left side) of the 3-D views, without the plan's fields.
template <typename K>
SweepProblem<K> sweep_problem(const at::Tensor& A3, const at::Tensor& B3, at::Tensor& X3, const TrsmArgs& args) {
  const Canonical c = canonicalise(args, A3.is_conj());
  SweepProblem<K> p;
  p.m = A3.size(1);
  p.n = args.left ? B3.size(2) : B3.size(1);
  p.batch = B3.size(0);
  const int64_t ar = A3.stride(1), ac = A3.stride(2);
  p.L = reinterpret_cast<const K*>(A3.const_data_ptr());
  p.l = c.transposed ? MatrixRef{ac, ar} : MatrixRef{ar, ac};
  p.l_batch = A3.size(0) == 1 ? 0 : A3.stride(0);
  p.B = reinterpret_cast<const K*>(B3.const_data_ptr());
  p.b = args.left ? MatrixRef{B3.stride(1), B3.stride(2)} : MatrixRef{B3.stride(2), B3.stride(1)};
  p.b_batch = B3.size(0) == 1 ? 0 : B3.stride(0);
  p.X = reinterpret_cast<K*>(X3.data_ptr());
  p.x = args.left ? MatrixRef{X3.stride(1), X3.stride(2)} : MatrixRef{X3.stride(2), X3.stride(1)};
  p.x_batch = X3.stride(0);
  if (!c.lower) read_backwards(p.m, p.L, p.l, p.B, p.b, p.X, p.x);
  p.conj = c.conj;
  p.unit = args.unit;
  p.alpha = to_kernel_scalar<K>(args.alpha);
  return p;
}

}  // namespace

template <typename S>
bool sweep_solve(const at::Tensor& A3, const at::Tensor& B3, at::Tensor& X3, const TrsmArgs& args,
                 const SweepPlan& plan) {
  using K = typename kernel_type<S>::type;
  SweepProblem<K> p = sweep_problem<K>(A3, B3, X3, args);
  p.rows = plan.rows;
  p.cols = plan.cols;
  p.segment = plan.segment;
  p.max_blocks = overrides().max_blocks;
  if (sweep_tasks(p) >= 0x7fffffff || !sweep_fits(p)) return false;
  const auto stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor work = at::empty({sweep_workspace_words(p)}, A3.options().dtype(at::kLong));
  check_launch(cudaMemsetAsync(work.data_ptr(), 0, work.nbytes(), stream), "zeroing the sweep's workspace");
  p.work = reinterpret_cast<unsigned long long*>(work.data_ptr());
  check_launch(launch_sweep<K>(p, stream), "launching the sweep kernel");
  return true;
}

template <typename S>
void sweep_repair(const at::Tensor& A3, const at::Tensor& B3, at::Tensor& X3, const TrsmArgs& args,
                  const at::Tensor& inaccurate) {
  using K = typename kernel_type<S>::type;
  SweepProblem<K> p = sweep_problem<K>(A3, B3, X3, args);
  p.segment = static_cast<int>(std::min<int64_t>(sweep_blocks(p), 1 << 30));  // one task per row block
  p.repair = inaccurate.data_ptr<int>();
  p.repair_count = inaccurate.numel();
  p.cols = 16;
  while (p.cols > 1 && !sweep_fits(p)) p.cols /= 2;  // panels as wide as the GPU's shared memory allows
  if (sweep_tasks(p) >= 0x7fffffff || !sweep_fits(p)) return;  // (no repair: README, Limitations)
  p.repair_per_entry = inaccurate.numel() / A3.size(0);  // (the inversion's tasks, batch entry outermost)
  const at::Tensor work = at::empty({sweep_workspace_words(p)}, A3.options().dtype(at::kLong));  // zeroed if used
  p.work = reinterpret_cast<unsigned long long*>(work.data_ptr());
  check_launch(launch_sweep<K>(p, c10::cuda::getCurrentCUDAStream()), "launching the repair sweep");
}

#define HSMA_INSTANTIATE(S)                                                                                      \
  template bool sweep_solve<S>(const at::Tensor&, const at::Tensor&, at::Tensor&, const TrsmArgs&,            \
                               const SweepPlan&);                                                             \
  template void sweep_repair<S>(const at::Tensor&, const at::Tensor&, at::Tensor&, const TrsmArgs&,           \
                                const at::Tensor&);
HSMA_FOR_EACH_DTYPE(HSMA_INSTANTIATE)
#undef HSMA_INSTANTIATE

}  // namespace hsma
