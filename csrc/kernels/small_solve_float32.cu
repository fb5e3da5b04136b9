// The small-path kernels for float32 (templates in small_solve.cuh).
#include "small_solve.cuh"

namespace hsma {
template hsmaError_t launch_small_solve<float>(const SolveProblem<float>&, hsmaStream_t);
}  // namespace hsma
