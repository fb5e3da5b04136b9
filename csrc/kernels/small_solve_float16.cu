// The small-path kernels for float16 storage, solved in float32 (templates in small_solve.cuh): L, B and X
// in float16, or L in float32 with B and X in float16.
#include "small_solve.cuh"

namespace hsma {
template hsmaError_t launch_small_solve(const SolveProblem<float, float16_bits, float16_bits>&, hsmaStream_t);
template hsmaError_t launch_small_solve(const SolveProblem<float, float, float16_bits>&, hsmaStream_t);
}  // namespace hsma
