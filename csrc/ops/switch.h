// The switch (csrc/ops/switch.cpp): the ATen operators it can route to hsma, in the order of
// torch.ops.hsma._routed_calls(). hsma_trsm.switch reads them as hsma_trsm._C.routed_ops.
#pragma once
#include <array>

namespace hsma {

inline constexpr std::array<const char*, 5> kRoutedOps = {"linalg_solve_triangular", "triangular_solve",
                                                           "cholesky_solve", "cholesky_inverse", "linalg_lu_solve"};

}  // namespace hsma
