// The small-path kernels for float64 (templates in small_solve.cuh).
#include "small_solve.cuh"

namespace hsma {
template hsmaError_t launch_small_solve<double>(const SolveProblem<double>&, hsmaStream_t);
}  // namespace hsma
