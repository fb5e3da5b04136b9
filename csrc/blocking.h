// The plan of a CUDA solve of order above 64, decided in one function, plan_blocking: the path (the GPU's path
// table, csrc/paths.h: the sweep, the blocked path, or ATen's solve, i.e. torch's cuBLAS kernel; rules where no
// table is usable), then the sweep's parameters (row block, panel width, task length), or the blocked path's outer
// block NB, driver variant and the inner block IB of the diagonal-block inversion (the GPU's block-size table,
// then every rule after it). Host logic only, built on CPU too, so that the tuners, the benchmark and the tests can
// ask for any GPU's plan (torch.ops.hsma._block_plan).
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

#include "overrides.h"
#include "paths.h"
#include "trsm.h"

namespace hsma {

// recursive: X1 = solve(T11, B1); B2 -= T21 X1; X2 = solve(T22, B2), leaves of NB rows;
// blocked: left-looking block rows, X_k = inv(T_kk) (alpha B_k - T_k,<k X_<k).
enum class BlockedVariant { kRecursive, kBlocked };
const char* variant_name(BlockedVariant v);

constexpr int64_t kDiagInverseMaxNBHost = 1024;  // = kDiagInverseMaxNB (kernels/trsm_problem.h)
constexpr int64_t kSmallMaxOrder = 64;           // = kSmallMaxM: the small path's orders, on the host
constexpr int64_t kDirectLeafMaxNB = kSmallMaxOrder;  // leaves the small kernels solve

// What the plan depends on besides the GPU.
struct BlockedShape {
  c10::ScalarType dtype;
  int64_t k = 0;         // order of the triangle
  int64_t rhs_cols = 0;  // right-hand-side columns in all: (left ? n : m) * batch
  bool a_shared = true;  // one triangle for the whole batch
  int64_t batch = 1;     // batch entries (rhs_cols / batch columns each)
};

// The sweep's parameters (SweepProblem's fields of the same names).
struct SweepPlan {
  int rows = 64;     // R: 64, or 128 (float32)
  int cols = 16;     // NC: panel width, 1, 2, 4, 8 or 16
  int segment = 4;   // G: column blocks per task
};

struct BlockPlan {
  LargePath path = LargePath::kBlocked;
  SweepPlan sweep;  // (path kSweep)
  int64_t nb = 0;
  BlockedVariant variant = BlockedVariant::kRecursive;
  int64_t ib = 0;      // the inversion's inner block; ib == nb: one level
  std::string source;  // where NB came from and the rules that changed it: "table <path> (size s), ..."
  // Leaves solved by the small kernels (no inversion, no leaf GEMM).
  bool direct_leaves() const { return nb <= kDirectLeafMaxNB; }
};

// The plan's view of a solve whose operands trsm checked into s: right-hand-side columns of all batch entries,
// whether one triangle serves them, the dtype it is solved in (float32 for bfloat16 / float16).
BlockedShape blocked_shape(const at::Tensor& A, bool left, const TrsmShape& s);

// The plan under the overrides o; `table` / `paths` "" are the GPU's block-size and path tables (table_path_for,
// paths_table_for); `explain`: the source names the path table's cell and times.
BlockPlan plan_blocking(const GpuIdentity& gpu, const BlockedShape& shape, const Overrides& o,
                        const std::string& table = "", const std::string& paths = "", bool explain = false);

// HSMA_TRSM_TABLE if set, else <package>/tuning/<gpu-slug>-sm<cc>.csv; "" when no directory is known.
std::string table_path_for(const GpuIdentity& gpu);

}  // namespace hsma
