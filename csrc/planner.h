// The planner: the one place that chooses how a CUDA solve runs. plan_small / plan_large return a Plan: the path (small for
// orders up to 64; above, the GPU's path table, csrc/paths.h, or the rules where no table is usable: the sweep,
// the blocked path, or the hand-off to ATen's solve, i.e. torch's cuBLAS kernel), the path's parameters, why, and
// the overrides the executor honours. The executors (csrc/cuda/exec.h, csrc/exec_aten.cpp) run the plan as it
// is. Host logic only, built on CPU too, so that the tuners, the benchmark and the tests can ask for any GPU's plan
// (torch.ops.hsma._block_plan).
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

#include "kernels/limits.h"
#include "overrides.h"
#include "paths.h"
#include "trsm.h"

namespace hsma {

// recursive: X1 = solve(T11, B1); B2 -= T21 X1; X2 = solve(T22, B2), leaves of NB rows;
// blocked: left-looking block rows, X_k = inv(T_kk) (alpha B_k - T_k,<k X_<k).
enum class BlockedVariant { kRecursive, kBlocked };
const char* variant_name(BlockedVariant v);

// What the plan depends on besides the GPU.
struct BlockedShape {
  c10::ScalarType dtype;
  int64_t k = 0;         // order of the triangle
  int64_t rhs_cols = 0;  // right-hand-side columns in all: (left ? n : m) * batch
  bool a_shared = true;  // one triangle for the whole batch
  int64_t batch = 1;     // batch entries (rhs_cols / batch columns each)
  bool capturing = false;  // the stream is capturing a CUDA graph: the path table's GPU-only choice
};

// The sweep's parameters (SweepProblem's fields of the same names).
struct SweepPlan {
  int rows = kSweepRows;  // R: 64, or 128 (float32)
  int cols = 16;          // NC: panel width, 1, 2, 4, 8 or 16
  int segment = 4;        // G: column blocks per task
};

// The plan of an order above 64.
struct BlockPlan {
  LargePath path = LargePath::kBlocked;
  SweepPlan sweep;  // (path kSweep)
  int64_t nb = 0;
  BlockedVariant variant = BlockedVariant::kRecursive;
  int64_t ib = 0;      // the inversion's inner block; ib == nb: one level
  // The repair's panel width (path kBlocked with inverted blocks, exec_repair.cpp): the widest of 16, 8, ..., 1
  // whose launch fits the GPU; 0: none fits, the blocked path runs without the repair (the source says so).
  int repair_cols = 0;
  std::string source;  // where NB came from and the rules that changed it: "table <path> (size s), ..."
  // Leaves solved by the small kernels (no inversion, no leaf GEMM).
  bool direct_leaves() const { return nb <= kDirectLeafMaxNB; }
};

// The plan's view of a solve whose operands trsm checked into s: right-hand-side columns of all batch entries,
// whether one triangle serves them, the dtype it is solved in (float32 for bfloat16 / float16), and whether A's
// device is capturing a CUDA graph (stream_capturing).
BlockedShape blocked_shape(const at::Tensor& A, bool left, const TrsmShape& s);

// The plan of an order above 64 under the overrides o; `table` / `paths` "" are the GPU's block-size and path
// tables (table_path_for, paths_table_for); `explain`: the source names the path table's cell and times.
BlockPlan plan_blocking(const GpuIdentity& gpu, const BlockedShape& shape, const Overrides& o,
                        const std::string& table = "", const std::string& paths = "", bool explain = false);

// HSMA_TRSM_TABLE if set, else <package>/tuning/<gpu-slug>-sm<cc>.csv; "" when no directory is known.
std::string table_path_for(const GpuIdentity& gpu);

// The paths of a CUDA solve, one executor each.
enum class SolvePath { kSmall, kSweep, kBlocked, kAten };
const char* solve_path_name(SolvePath p);

// The plan of one CUDA call.
struct Plan {
  SolvePath path = SolvePath::kSmall;
  BlockPlan large;     // orders above 64: the sweep's or the blocked path's parameters, and why
  SmallKnobs small;    // the small kernels' knobs (also the blocked path's direct leaves); max_blocks caps the sweep
  bool aten_gemm = false;  // the blocked path's GEMMs by ATen instead of cuBLAS directly
};

// The plan of an order up to kSmallMaxM under the overrides o (read once at the call's entry): the small kernels,
// one launch for the whole batch; no table and no GPU query.
Plan plan_small(const Overrides& o);
// The plan of an order above kSmallMaxM on `gpu` (plan_blocking's).
Plan plan_large(const GpuIdentity& gpu, const BlockedShape& shape, const Overrides& o, bool explain = false);

}  // namespace hsma
