// The per-GPU path table: which path serves a CUDA solve of order above 64 (the sweep, the blocked path, or
// ATen's solve, i.e. torch's own cuBLAS kernel), measured on a grid of (dtype, k, cols, batch) by
// `python -m benchmarks.tune_paths` and looked up here at the nearest grid cell (log scale in each coordinate).
//
// Table format (CSV, '#' lines are metadata or comments; an optional `gpu_path` column is the path while a CUDA graph
// is captured, where host time is not spent again at replay (missing or empty: `path`); the other columns after
// `path` are the measured times, kept for the plan's explanation):
//   # gpu: NVIDIA H200
//   # capability: 9.0
//   dtype,k,cols,batch,path,gpu_path,<time columns...>
//   float32,1024,1,1,sweep,sweep,...
// Resolution: HSMA_TRSM_PATHS=path (read once, when the library loads) if set, else
// <package>/tuning/<gpu-slug>-sm<cc>-paths.csv. Without a usable table for the GPU the plan falls back to its rules
// (csrc/planner.cpp), says so in its reason, and warns once. This file also holds what both tuning tables share:
// where they are, and how their text is read.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hsma {

enum class LargePath { kBlocked, kSweep, kAten };
const char* path_name(LargePath p);

// What the plan knows of a GPU: its tables' key, and the limit its rules check.
struct GpuIdentity {
  std::string name;          // as the driver reports it: "NVIDIA H200"
  std::string capability;    // "9.0"
  int64_t shared_optin = 0;  // the most dynamic shared memory a block can opt in to, bytes (0: unknown, no limit)
};

// The identity of CUDA device `device`, from the CUDA backend (csrc/cuda/trsm_cuda.cpp registers it when the
// library loads, from the per-device cache of kernels/portable.cuh); nullopt in a build without CUDA.
using GpuIdentitySource = GpuIdentity (*)(int device);
void set_gpu_identity_source(GpuIdentitySource source);
std::optional<GpuIdentity> gpu_identity(int device);

// Whether the current stream of CUDA device `device` is capturing a CUDA graph, from the CUDA backend likewise;
// false in a build without CUDA.
using CaptureSource = bool (*)(int device);
void set_capture_source(CaptureSource source);
bool stream_capturing(int device);

// The coordinates a path depends on: A's order k, right-hand-side columns per batch entry (n for a left
// solve, m for a right one), batch entries (a triangle broadcast over the batch counts as a batch: torch
// solves it as one).
struct PathCell {
  c10::ScalarType dtype;
  int64_t k = 0, cols = 1, batch = 1;
  bool capturing = false;  // a CUDA graph is being captured: the cell's gpu_path
};

struct PathChoice {
  bool found = false;  // false: no usable table (reason says why)
  LargePath path = LargePath::kBlocked;
  std::string reason;  // the table, the cell and its measured times, or why there is none
};

// The table's path for the nearest cell; `explain`: fill the reason (a string built per call) also when found;
// `table` "" is the GPU's table (paths_table_for).
PathChoice lookup_path(const GpuIdentity& gpu, const PathCell& cell, bool explain, const std::string& table = "");

// Helpers of both tables' readers: s without surrounding white space; a dtype's name in the tables ("float32", ...;
// "?" for others); whether a table's '# gpu:' and '# capability:' values name this GPU.
std::string trim_space(const std::string& s);
const char* table_dtype_name(c10::ScalarType t);
bool measured_on(const std::string& gpu, const std::string& capability, const GpuIdentity& id);

// The text of a tuning table (this one and the block-size table, planner.cpp): the values of its '# gpu:' and
// '# capability:' lines, and its other non-empty lines trimmed, with their line numbers (the header first); error
// when it cannot be opened, or names no GPU.
struct TableMeta {
  std::string error, gpu, capability;
};
struct TableText : TableMeta {
  std::vector<std::pair<int, std::string>> lines;
};
TableText read_table_text(const std::string& path);

// HSMA_TRSM_PATHS if set, else <package>/tuning/<gpu-slug>-sm<cc>-paths.csv; "" when no directory is known.
std::string paths_table_for(const GpuIdentity& gpu);

// <package>/tuning/<gpu-slug>-sm<cc><suffix>, "" when the package has not set its directory
// (torch.ops.hsma._set_tuning_dir, at import).
std::string tuning_file_for(const GpuIdentity& gpu, const std::string& suffix);

}  // namespace hsma
