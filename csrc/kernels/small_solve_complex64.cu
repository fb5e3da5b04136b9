// The small-path kernels for complex64 (templates in small_solve.cuh).
#include "small_solve.cuh"

namespace hsma {
template hsmaError_t launch_small_solve<complex<float>>(const SolveProblem<complex<float>>&, hsmaStream_t);
}  // namespace hsma
