// Development overrides: forced kernel and block-size choices for tests, ablations, the tuner and
// probes (users need none; the defaults are the library's own choices).
//
// One immutable Overrides object is current. A call reads it once, at its entry, with one atomic
// load (overrides()), no lock and no parsing; the planner takes it as a value and puts what the
// executors honour into the plan (csrc/planner.h), so nothing past the entry reads it again. It is
// replaced as a whole by torch.ops.hsma._set_overrides(spec)
// (Python: hsma_trsm._ops.overrides(**keys), a context manager that restores the previous one), or
// once at load from HSMA_TRSM_OVERRIDES=spec (for probes run from a shell).
//
// spec: "key=value,key=value,...": the small-path knobs (kernels/small/knobs.h, HSMA_SMALL_KNOBS) and
// the keys of kKeys in overrides.cpp (all listed in docs/kernels.md).
// An unknown key or a value out of its set raises ValueError naming the key.
//
// overrides.cpp is the only file that reads the environment: HSMA_TRSM_OVERRIDES, and
// HSMA_TRSM_TABLE (the users' block-size table, table_path_from_env) and HSMA_TRSM_PATHS (their path table,
// paths_path_from_env).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "kernels/small/knobs.h"

namespace hsma {

struct Overrides {
  // Small path (kernels/small/knobs.h): SolveProblem's knobs; max_blocks also caps the sweep's and the inverse
  // kernel's grids. Their defaults: the launchers' choices.
  SmallKnobs small;
  // Blocked path (csrc/planner.cpp). 0 or -1: the block plan's choice.
  int64_t nb = 0;          // NB exactly: none of the rules after the table applies
  int64_t table_nb = 0;    // NB in place of the table's row; the rules after it apply (the tuner)
  int variant = -1;        // BlockedVariant: 0 recursive, 1 blocked
  int64_t ib = 0;          // inner block of the diagonal inversion (a power of two)
  bool aten_gemm = false;  // ATen's GEMMs instead of cuBLAS directly
  // The path of orders above 64 (csrc/paths.h): -1 the plan's choice; 0 blocked, 1 sweep, 2 ATen (LargePath's order).
  int path = -1;
  // The sweep (csrc/kernels/sweep.cu). -1 / 0: the plan's choice.
  int sweep = -1;          // 1: the sweep for every order above 64; 0: never
  int sweep_rows = 0;      // its row block R (64; 128 for float32)
  int sweep_cols = 0;      // its panel width NC (1, 2, 4, 8, 16)
  int sweep_segment = 0;   // its task length G in row blocks
  // torch.ops.hsma.trtri on CUDA (csrc/cuda/inverse.cpp). -1: its choice; 0 the solve against an identity,
  // 1 the small inverse kernel (where it applies: real, k <= 64).
  int inverse = -1;
  // Derived when set.
  const char* spec = "";      // canonical spec: the keys set, in kKeys' order
};

inline constexpr Overrides kNoOverrides{};

// The current overrides; never null, and every object it has pointed to lives until exit.
extern std::atomic<const Overrides*> g_overrides;
inline const Overrides& overrides() { return *g_overrides.load(std::memory_order_acquire); }

// Parses spec and makes it current (ValueError naming the key when it does not parse).
void set_overrides(const std::string& spec);

// HSMA_TRSM_TABLE, the users' block-size table path; "" when unset.
std::string table_path_from_env();
// HSMA_TRSM_PATHS, the users' path table (csrc/paths.h), read once; "" when unset.
std::string paths_path_from_env();

}  // namespace hsma
