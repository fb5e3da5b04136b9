// The small-path kernels for complex128 (templates in small_solve.cuh).
#include "small_solve.cuh"

namespace hsma {
template hsmaError_t launch_small_solve<complex<double>>(const SolveProblem<complex<double>>&, hsmaStream_t);
}  // namespace hsma
