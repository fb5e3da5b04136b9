// The small-path kernels for bfloat16 storage, solved in float32 (templates in small_solve.cuh): L, B and X
// in bfloat16, or L in float32 with B and X in bfloat16.
#include "small_solve.cuh"

namespace hsma {
template hsmaError_t launch_small_solve(const SolveProblem<float, bfloat16_bits, bfloat16_bits>&, hsmaStream_t);
template hsmaError_t launch_small_solve(const SolveProblem<float, float, bfloat16_bits>&, hsmaStream_t);
}  // namespace hsma
