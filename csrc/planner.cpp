// The planner (planner.h): the path of an order above 64 (the path table, or the rules and the limits of the GPU),
// and the blocked path's block sizes from the block-size table, then the rules after it.
//
// The table is the HSMA-TRSM paper's offline profiling + online lookup: `python -m benchmarks.tune`
// times candidate (NB, variant) pairs per (dtype, size) on one GPU and writes the fastest; here a
// solve takes the row of the nearest measured size (in log scale).
//
// Table format (CSV, '#' lines are metadata or comments):
//   # gpu: NVIDIA H200
//   # capability: 9.0
//   dtype,size,nb,variant
//   float32,1024,256,recursive
// Resolution: HSMA_TRSM_TABLE=path if set, else <package>/tuning/<gpu-slug>-sm<cc>.csv.
// A missing, malformed or foreign-GPU table gives one warning and the default.
#include <torch/library.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>

#include "planner.h"

namespace hsma {
namespace {

constexpr int64_t kDefaultNB = 128;

struct Entry {
  int64_t size, nb;
  BlockedVariant variant;
};

struct Table : TableMeta {  // error empty when loaded
  std::map<std::string, std::vector<Entry>> by_dtype;
};

std::mutex g_mutex;
std::map<std::string, Table> g_tables;   // parsed tables by path
std::set<std::string> g_warned;

bool parse_variant(const std::string& v, BlockedVariant* out) {
  if (v == "recursive") { *out = BlockedVariant::kRecursive; return true; }
  if (v == "blocked") { *out = BlockedVariant::kBlocked; return true; }
  return false;
}

Table parse_table(const std::string& path) {
  Table t;
  const TableText text = read_table_text(path);
  static_cast<TableMeta&>(t) = text;
  if (!t.error.empty()) return t;
  bool header = false;
  for (const auto& [lineno, line] : text.lines) {
    if (!header) {
      if (line != "dtype,size,nb,variant") {
        t.error = path + ":" + std::to_string(lineno) + ": expected the header 'dtype,size,nb,variant'";
        return t;
      }
      header = true;
      continue;
    }
    std::stringstream ss(line);
    std::string dtype, size, nb, variant;
    std::getline(ss, dtype, ',');
    std::getline(ss, size, ',');
    std::getline(ss, nb, ',');
    std::getline(ss, variant, ',');
    Entry e{};
    char* end = nullptr;
    e.size = std::strtoll(size.c_str(), &end, 10);
    const bool size_ok = end && *end == '\0' && e.size > 0;
    e.nb = std::strtoll(nb.c_str(), &end, 10);
    const bool nb_ok = end && *end == '\0' && e.nb >= 1 && e.nb <= kDiagInverseMaxNB;
    const bool dtype_ok = dtype == "float32" || dtype == "float64" || dtype == "complex64" || dtype == "complex128";
    if (!size_ok || !nb_ok || !dtype_ok || !parse_variant(trim_space(variant), &e.variant)) {
      t.error = path + ":" + std::to_string(lineno) + ": malformed row '" + line + "'";
      return t;
    }
    t.by_dtype[dtype].push_back(e);
  }
  if (!header) t.error = path + ": no 'dtype,size,nb,variant' header";
  return t;
}

void warn_once(const std::string& key, const std::string& msg) {
  if (g_warned.insert(key).second) TORCH_WARN("hsma_trsm: ", msg);
}

}  // namespace

std::string table_path_for(const GpuIdentity& gpu) {
  const std::string env = table_path_from_env();
  return env.empty() ? tuning_file_for(gpu, ".csv") : env;
}

const char* variant_name(BlockedVariant v) { return v == BlockedVariant::kRecursive ? "recursive" : "blocked"; }

namespace {

// The table's row for the nearest size (NB, variant, source), or the default.
BlockPlan lookup_table(const std::string& path, const GpuIdentity& gpu, c10::ScalarType dtype, int64_t k) {
  BlockPlan plan;
  plan.nb = kDefaultNB;
  plan.source = "default";
  if (path.empty()) return plan;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_tables.find(path);
  if (it == g_tables.end()) it = g_tables.emplace(path, parse_table(path)).first;
  const Table& t = it->second;
  if (!t.error.empty()) {
    // A missing shipped table is normal on an untuned GPU; say so once, quietly different.
    warn_once(path, "no usable block-size table (" + t.error + "); using NB = " + std::to_string(kDefaultNB) +
                        ". Run `python -m benchmarks.tune` to measure one for this GPU.");
  } else if (!measured_on(t.gpu, t.capability, gpu)) {
    warn_once(path + "|" + gpu.name, "block-size table " + path + " was measured on '" + t.gpu + "' (capability " +
                                         t.capability + "), not on this '" + gpu.name + "' (capability " +
                                         gpu.capability + "); using NB = " + std::to_string(kDefaultNB));
  } else {
    auto e = t.by_dtype.find(table_dtype_name(dtype));
    if (e != t.by_dtype.end() && !e->second.empty()) {
      const Entry* best = nullptr;
      double best_d = 0;
      for (const Entry& x : e->second) {
        const double d = std::fabs(std::log(double(x.size)) - std::log(double(k > 0 ? k : 1)));
        if (!best || d < best_d) { best = &x; best_d = d; }
      }
      plan.nb = best->nb;
      plan.variant = best->variant;
      plan.source = "table " + path + " (size " + std::to_string(best->size) + ")";
    }
  }
  return plan;
}

constexpr int64_t kDirectLeavesMaxK = 256;  // orders up to which NB is at most kDirectLeafMaxNB
constexpr int64_t kNarrowRhs = 64;          // right-hand-side columns (times batch) counted as narrow
constexpr int64_t kNarrowMaxNB = 512;       // ... and the largest NB taken for them
constexpr int64_t kTwoLevelMinNB = 256;     // the smallest NB inverted in two levels

// The sweep's range where no path table is usable: it beats the blocked path for up to 8 float32 columns (2 of
// 8 bytes, 1 of 16) per matrix from order 384; with more columns its chain of R x R products costs more than the
// blocked path's GEMMs (docs/experiments.md, the sweep's crossover).
constexpr int64_t kSweepMinK = 384;
int64_t sweep_max_cols(c10::ScalarType dtype) {
  return dtype == c10::ScalarType::Float ? 8 : (dtype == c10::ScalarType::ComplexDouble ? 1 : 2);
}

// One matrix, one column, from the sweep's orders: ATen's solve (cuBLAS trsm, one launch) is faster than the
// sweep for complex types, whose chain of complex R x R products is the longer, and for float64 below order 2048
// (docs/experiments.md).
constexpr int64_t kAtenMaxKDouble = 2048;
bool aten_takes(const BlockedShape& shape) {
  if (shape.batch != 1 || shape.rhs_cols != 1 || shape.k < kSweepMinK) return false;
  return c10::isComplexType(shape.dtype) || (shape.dtype == c10::ScalarType::Double && shape.k < kAtenMaxKDouble);
}
constexpr int64_t kSweepWideRowsK = 2048;  // float32 orders from which row blocks of 128 take 4+ columns

// The sweep's parameters for `cols` columns per matrix (overrides first); tasks of 8 row blocks.
SweepPlan plan_sweep(const BlockedShape& shape, int64_t cols, const Overrides& o) {
  SweepPlan s;
  s.segment = o.sweep_segment > 0 ? o.sweep_segment : 8;
  s.cols = 1;
  while (s.cols < cols && s.cols < kSweepMaxCols) s.cols *= 2;
  if (o.sweep_cols > 0) s.cols = o.sweep_cols;
  if (o.sweep_rows > 0)
    s.rows = o.sweep_rows;
  else
    s.rows = shape.dtype == c10::ScalarType::Float && shape.k >= kSweepWideRowsK && s.cols >= 4 ? 128 : 64;
  if (!sweep_rows_built(s.rows, c10::elementSize(shape.dtype))) s.rows = kSweepRows;  // (128: float32 only)
  return s;
}

// Whether the sweep's launch takes the plan s on this GPU: its tasks fit one launch, its shared memory the GPU's
// (unknown: no limit).
bool sweep_fits(const GpuIdentity& gpu, const BlockedShape& shape, int64_t cols, const SweepPlan& s, bool repair,
                std::string* why) {
  const int64_t batch = shape.batch > 0 ? shape.batch : 1;
  if (sweep_task_count(batch, shape.k, cols, s.rows, s.cols, s.segment) >= kMaxLaunchTasks) {
    *why = "more tasks than one launch takes";
    return false;
  }
  const size_t bytes = sweep_shared_bytes(c10::elementSize(shape.dtype), s.rows, s.cols, repair);
  if (gpu.shared_optin > 0 && bytes > size_t(gpu.shared_optin)) {
    *why = std::to_string(bytes) + " bytes of shared memory, the GPU has " + std::to_string(gpu.shared_optin);
    return false;
  }
  return true;
}

// The repair's panel width: the widest of kSweepMaxCols, ..., 1 that fits, with one task per row block of 64 rows;
// 0 when none does.
int repair_cols(const GpuIdentity& gpu, const BlockedShape& shape, int64_t cols, std::string* why) {
  SweepPlan s;
  s.rows = kSweepRows;
  s.segment = static_cast<int>(std::min<int64_t>((shape.k + s.rows - 1) / s.rows, 1 << 30));
  s.cols = kSweepMaxCols;
  while (s.cols > 1 && !sweep_fits(gpu, shape, cols, s, true, why)) s.cols /= 2;
  return sweep_fits(gpu, shape, cols, s, true, why) ? s.cols : 0;
}

// The path where no path table is usable: the sweep for a few columns per matrix from a medium order, ATen's
// solve for the single columns above, the blocked path otherwise.
LargePath rule_path(const BlockedShape& shape, int64_t cols) {
  if (shape.k < kSweepMinK || cols > sweep_max_cols(shape.dtype)) return LargePath::kBlocked;
  return aten_takes(shape) ? LargePath::kAten : LargePath::kSweep;
}

}  // namespace

BlockedShape blocked_shape(const at::Tensor& A, bool left, const TrsmShape& s) {
  int64_t a_numel = 1;
  for (auto v : A.sizes().slice(0, A.dim() - 2)) a_numel *= v;
  const int64_t bt = s.batch_numel();
  const at::ScalarType dtype = half_dtype(A.scalar_type()) ? at::kFloat : A.scalar_type();
  return BlockedShape{dtype, s.k, (left ? s.n : s.m) * bt, a_numel == 1, bt,
                      A.is_cuda() && stream_capturing(A.get_device())};
}

BlockPlan plan_blocking(const GpuIdentity& gpu, const BlockedShape& shape, const Overrides& o,
                        const std::string& table, const std::string& paths, bool explain) {
  const int64_t k = shape.k;
  const int64_t batch = shape.batch > 0 ? shape.batch : 1, cols = shape.rhs_cols / batch;
  // The path: forced by the overrides (an explicit NB asks for the blocked path), else the GPU's path table, else
  // the rules.
  LargePath path = LargePath::kBlocked;
  std::string why;
  if (o.path >= 0) {
    path = static_cast<LargePath>(o.path);
    why = "override path";
  } else if (o.sweep == 1) {
    path = LargePath::kSweep;
    why = "override sweep";
  } else if (o.sweep == 0 || o.nb > 0 || o.table_nb > 0) {
    // the blocked path, its NB's source says why
  } else {
    const PathChoice c = lookup_path(gpu, PathCell{shape.dtype, k, cols, batch, shape.capturing}, explain, paths);
    path = c.found ? c.path : rule_path(shape, cols);
    why = c.found ? (explain ? c.reason : "path table") : "rules (" + c.reason + ")";
  }
  if (path == LargePath::kAten) {
    BlockPlan aten;
    aten.path = LargePath::kAten;
    aten.source = "aten (torch's cuBLAS trsm): " + why;
    return aten;
  }
  if (path == LargePath::kSweep) {
    BlockPlan sweep;
    sweep.path = LargePath::kSweep;
    sweep.sweep = plan_sweep(shape, cols, o);
    std::string unfit;
    if (sweep_fits(gpu, shape, cols, sweep.sweep, false, &unfit)) {
      sweep.source = why == "override sweep" ? why : "sweep: " + why;
      return sweep;
    }
    // The sweep cannot launch this plan here: the blocked path, with its overrides (nb, variant, ...).
    why = (why == "override sweep" ? why : "sweep: " + why) + ", which does not fit (" + unfit + ")";
  }
  BlockPlan plan = lookup_table(table.empty() ? table_path_for(gpu) : table, gpu, shape.dtype, k);
  if (!why.empty()) plan.source = "blocked: " + why + "; NB from " + plan.source;
  if (o.nb > 0) {  // forced as it is: none of the rules below
    plan.nb = o.nb;
    plan.source = "override nb";
  } else {
    if (o.table_nb > 0) {  // as if the table's row said so (the tuner's candidates)
      plan.nb = o.table_nb;
      plan.source = "override table_nb";
    }
    // Medium orders: leaves of at most 64 rows solved directly by the small kernels (no inversion
    // launch, no leaf GEMM); the inversion's sequential steps would cost more than they save.
    if (k <= kDirectLeavesMaxK && plan.nb > kDirectLeafMaxNB) {
      plan.nb = kDirectLeafMaxNB;
      plan.source += ", NB <= 64 up to order 256";
    }
    // Narrow right-hand sides (a few columns in all): the GEMMs are tiny and each costs a host-side
    // launch, so take the fewest blocks the inversion allows (one or two leaves), as a power of
    // two of at most 512 (the inversion's steps are sequential: 1024 costs more than it saves).
    if (k > kDirectLeavesMaxK && shape.rhs_cols <= kNarrowRhs) {
      int64_t wide = 1;
      while (wide < (k + 1) / 2 && wide < kNarrowMaxNB) wide *= 2;
      if (wide > plan.nb) {
        plan.nb = wide;
        plan.source += ", widened for a narrow right-hand side";
      }
    }
  }
  if (o.variant >= 0) {
    plan.variant = static_cast<BlockedVariant>(o.variant);
    plan.source += ", override variant";
  }
  // The inner block IB (the paper's NB / 8): the inversion kernel inverts IB x IB diagonal tiles
  // (IB sequential steps instead of NB) and GEMMs double them up to NB x NB. For a power-of-two
  // NB >= kTwoLevelMinNB and one triangle shared by the batch; the override ib forces it
  // (IB >= NB: NB x NB tiles inverted directly).
  plan.ib = plan.nb;
  if (!plan.direct_leaves() && (plan.nb & (plan.nb - 1)) == 0 && shape.a_shared) {
    if (o.ib > 0)
      plan.ib = std::min(o.ib, plan.nb);
    else if (plan.nb >= kTwoLevelMinNB)
      plan.ib = plan.nb / 8;
  }
  // Inverted blocks are repaired by substitution where an inverse is inaccurate, where the repair's launch fits.
  if (!plan.direct_leaves()) {
    std::string unfit;
    plan.repair_cols = repair_cols(gpu, shape, cols, &unfit);
    if (plan.repair_cols == 0) plan.source += ", no repair (" + unfit + ")";
  }
  return plan;
}

const char* solve_path_name(SolvePath p) {
  switch (p) {
    case SolvePath::kSmall: return "small";
    case SolvePath::kSweep: return "sweep";
    case SolvePath::kAten: return "aten";
    default: return "blocked";
  }
}

Plan plan_small(const Overrides& o) {
  Plan p;
  p.path = SolvePath::kSmall;
  p.small = o.small;
  p.aten_gemm = o.aten_gemm;
  return p;
}

Plan plan_large(const GpuIdentity& gpu, const BlockedShape& shape, const Overrides& o, bool explain) {
  Plan p = plan_small(o);
  p.large = plan_blocking(gpu, shape, o, "", "", explain);
  p.path = p.large.path == LargePath::kSweep ? SolvePath::kSweep
           : p.large.path == LargePath::kAten ? SolvePath::kAten
                                              : SolvePath::kBlocked;
  return p;
}

namespace {

using PlanTuple = std::tuple<int64_t, std::string, int64_t, std::string, std::string, int64_t, int64_t, int64_t>;

PlanTuple block_plan_op(c10::ScalarType dtype, int64_t k, int64_t rhs_cols, bool a_shared, c10::string_view gpu,
                        c10::string_view capability, c10::string_view table, int64_t batch, c10::string_view paths,
                        bool capturing) {
  const BlockPlan p =
      plan_blocking(GpuIdentity{std::string(gpu), std::string(capability)},
                    BlockedShape{dtype, k, rhs_cols, a_shared, batch, capturing}, overrides(), std::string(table),
                    std::string(paths), /*explain=*/true);
  return {p.nb, variant_name(p.variant), p.ib, p.source, path_name(p.path), p.sweep.rows, p.sweep.cols,
          p.sweep.segment};
}

}  // namespace
}  // namespace hsma

TORCH_LIBRARY_FRAGMENT(hsma, m) {
  m.def("_block_plan(ScalarType dtype, int k, int rhs_cols, bool a_shared, str gpu, str capability, "
        "str table=\"\", int batch=1, str paths=\"\", bool capturing=False) -> "
        "(int, str, int, str, str, int, int, int)",
        &hsma::block_plan_op);
}
