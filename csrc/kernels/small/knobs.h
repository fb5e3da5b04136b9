// The small path's development knobs, listed once (HSMA_SMALL_KNOBS). The list generates the fields of
// SmallKnobs (the overrides' value), of SolveProblem (the launch) and of SmallShape (the selection), the spec
// parser of csrc/overrides.cpp, and what the host selection driver (tests/small_selection_driver.cpp) accepts.
// A knob's effect is coded where it applies (select.h or a launcher); nothing else names it.
// Plain C++17 without CUDA, HIP or torch headers.
#pragma once
#include <cstdint>
#include <string>

namespace hsma {

// The small-path kernels (knob small_kernel): X(enumerator, value, name). kAuto lets the selection choose;
// kWarpTasks is the segment kernel with one matrix per warp; kTiles the register-tiled kernel (orders 33-64);
// kMma the FP64 tensor-core kernel (float64 and complex128 on sm_80+). kPipeline, the HSMA-TRSM paper's
// complex128 seven-stage pipeline (kernels/ablation/small_pipeline.cu), exists only in a build with
// HSMA_TRSM_ABLATION=1.
#ifdef HSMA_TRSM_ABLATION
#define HSMA_ABLATION_SMALL_KERNELS(X) X(kPipeline, 3, "pipeline")
#else
#define HSMA_ABLATION_SMALL_KERNELS(X)
#endif
#define HSMA_SMALL_KERNELS(X)                                                                      \
  X(kAuto, 0, "auto") X(kColumns, 1, "columns") X(kSegments, 2, "segments") HSMA_ABLATION_SMALL_KERNELS(X) \
  X(kWarpTasks, 4, "warps") X(kTiles, 5, "tiles") X(kMma, 6, "mma")

enum class SmallKernel : int {
#define HSMA_X(e, v, name) e = v,
  HSMA_SMALL_KERNELS(HSMA_X)
#undef HSMA_X
};

// The values a knob takes: a set of integers, an integer range, or SmallKernel's names.
struct KnobRule {
  int64_t values[6] = {};
  int count = 0;              // > 0: one of values[0 .. count)
  int64_t lo = 0, hi = 0;     // count == 0, !names: an integer in [lo, hi]
  bool names = false;         // a SmallKernel name
  const char* text = nullptr;  // how errors describe a range
};
template <typename... V> constexpr KnobRule knob_values(V... v) {
  KnobRule r;
  const int64_t list[] = {int64_t(v)...};
  for (int64_t x : list) r.values[r.count++] = x;
  return r;
}
constexpr KnobRule knob_range(int64_t lo, int64_t hi, const char* text) {
  KnobRule r;
  r.lo = lo;
  r.hi = hi;
  r.text = text;
  return r;
}
constexpr KnobRule knob_kernel_names() {
  KnobRule r;
  r.names = true;
  return r;
}

// X(field, key, type, default, rule): the field of SmallKnobs, SolveProblem and SmallShape; its key in the override
// spec (csrc/overrides.h); its default, which means "the launcher's choice"; the values the key takes.
//   small_kernel   the kernel (auto: the selection's choice)
//   segment_lanes  lanes per column of the segment kernel
//   segment_rows   rows per lane of warp-wide segments: 1 strided, 2 blocked
//   segment_steps  steps per loop iteration of the blocked substitution and the tile kernel (32: unrolled)
//   column_rows    most rows of a column a column-kernel thread holds at once
//   mma_warps      warps per block of the tensor-core kernel
//   mma_fold       tensor-core kernel with A batched: fold A's inverses (1) or substitute (0)
//   async_copy     stage triangles with cp.async where the GPU has it (0: through registers)
//   pdl            programmatic dependent launch on sm_90+: 0 plain, 1 release at start, 2 at end
//   max_blocks     cap on every small-path grid (also the sweep's and the inverse kernel's; tests)
#define HSMA_SMALL_KNOBS(X)                                                                           \
  X(kernel, "small_kernel", SmallKernel, SmallKernel::kAuto, knob_kernel_names())                     \
  X(segment_lanes, "segment_lanes", int, 0, knob_values(8, 32))                                       \
  X(segment_rows, "segment_rows", int, 0, knob_values(1, 2))                                          \
  X(segment_steps, "segment_steps", int, 0, knob_values(1, 2, 4, 32))                                 \
  X(column_rows, "column_rows", int, 0, knob_values(16, 32, 64))                                      \
  X(mma_warps, "mma_warps", int, 0, knob_values(4, 8))                                                \
  X(mma_fold, "mma_fold", int, -1, knob_values(0, 1))                                                 \
  X(async_copy, "async_copy", bool, true, knob_values(0, 1))                                          \
  X(dependent_launch, "pdl", int, -1, knob_values(0, 1, 2))                                           \
  X(max_blocks, "max_blocks", int64_t, 0, knob_range(1, 0x7fffffff, "a positive integer below 2^31"))

// The knobs' fields, declared in a struct (SolveProblem and SmallShape expand them in place).
#define HSMA_SMALL_KNOB_FIELD(field, key, type, dflt, rule) type field = dflt;
#define HSMA_SMALL_KNOB_FIELDS HSMA_SMALL_KNOBS(HSMA_SMALL_KNOB_FIELD)

// The overrides' value of the small-path knobs.
struct SmallKnobs {
  HSMA_SMALL_KNOB_FIELDS
};

// Copies every knob from src to dst (SmallKnobs, SolveProblem or SmallShape).
template <typename Dst, typename Src> void copy_small_knobs(Dst& dst, const Src& src) {
#define HSMA_X(field, key, type, dflt, rule) dst.field = src.field;
  HSMA_SMALL_KNOBS(HSMA_X)
#undef HSMA_X
}

// SmallKernel's name of v ("" for none).
inline const char* small_kernel_name(int64_t v) {
#define HSMA_X(e, value, name) if (v == value) return name;
  HSMA_SMALL_KERNELS(HSMA_X)
#undef HSMA_X
  return "";
}

// What a rule accepts, for errors: "8 or 32", "auto, columns, ... or mma", a range's text.
inline std::string knob_accepts(const KnobRule& r) {
  std::string items[8];
  int n = 0;
  if (r.names) {
#define HSMA_X(e, value, name) items[n++] = name;
    HSMA_SMALL_KERNELS(HSMA_X)
#undef HSMA_X
  } else if (r.count == 0) {
    return r.text;
  } else {
    for (int i = 0; i < r.count; ++i) items[n++] = std::to_string(r.values[i]);
  }
  std::string s;
  for (int i = 0; i < n; ++i) s += (i == 0 ? "" : i == n - 1 ? " or " : ", ") + items[i];
  return s;
}

// Parses v under rule r into *out: a decimal integer of at most 10 digits (no sign, space or exponent), or a
// kernel's name; false when r does not accept it.
inline bool parse_knob(const std::string& v, const KnobRule& r, int64_t* out) {
  if (r.names) {
#define HSMA_X(e, value, name) \
  if (v == name) {             \
    *out = value;              \
    return true;               \
  }
    HSMA_SMALL_KERNELS(HSMA_X)
#undef HSMA_X
    return false;
  }
  if (v.empty() || v.size() > 10 || v.find_first_not_of("0123456789") != std::string::npos) return false;
  const int64_t x = std::stoll(v);
  if (r.count == 0) {
    if (x < r.lo || x > r.hi) return false;
    *out = x;
    return true;
  }
  for (int i = 0; i < r.count; ++i)
    if (x == r.values[i]) {
      *out = x;
      return true;
    }
  return false;
}

// The spec text of a knob's value (a kernel's name, else the integer).
inline std::string knob_text(const KnobRule& r, int64_t v) { return r.names ? small_kernel_name(v) : std::to_string(v); }

// Sets knob `key` of k from v; false when the key is not a knob (*known false) or v is not accepted.
inline bool set_small_knob(SmallKnobs& k, const std::string& key, const std::string& v, bool* known) {
  *known = true;
  int64_t x = 0;
#define HSMA_X(field, name, type, dflt, rule)   \
  if (key == name) {                            \
    if (!parse_knob(v, rule, &x)) return false; \
    k.field = static_cast<type>(x);             \
    return true;                                \
  }
  HSMA_SMALL_KNOBS(HSMA_X)
#undef HSMA_X
  *known = false;
  return false;
}

}  // namespace hsma
