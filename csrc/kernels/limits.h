// Every constant that the host (the planner, the overrides, the executors) and the kernels share, and the
// sizes the planner needs to know whether a kernel fits the GPU. Plain C++17: no torch, CUDA or HIP header, so
// that the host-only planner (built on CPU too) and the kernels include the same definitions.
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define HSMA_HOST_DEVICE __host__ __device__
#else
#define HSMA_HOST_DEVICE
#endif

namespace hsma {

// The small path's orders: the small kernels take triangles of order 1..kSmallMaxM.
constexpr int64_t kSmallMaxM = 64;
// The blocked path's leaves of at most this many rows are solved by the small kernels (no inversion).
constexpr int64_t kDirectLeafMaxNB = kSmallMaxM;
// The largest diagonal block the inversion kernel takes (kernels/diag_inverse.cu), so the largest NB.
constexpr int64_t kDiagInverseMaxNB = 1024;
// Tasks of one launch: the grid-stride loops count them in int.
constexpr int64_t kMaxLaunchTasks = 0x7fffffff;

// The sweep's instances (kernels/sweep.cu): row blocks R of 64 for every dtype and of 128 for 4-byte elements
// (float32) only; panels of 1, 2, 4, 8 or kSweepMaxCols columns.
constexpr int kSweepRows = 64;
constexpr int kSweepWideRows = 128;
constexpr int kSweepMaxCols = 16;
constexpr bool sweep_rows_built(int rows, size_t elem_bytes) {
  return rows == kSweepRows || (rows == kSweepWideRows && elem_bytes == 4);
}

// Tasks of one panel's sweep: 1 for the first row block, ceil(i / G) for row block i >= 1 (G: task length).
HSMA_HOST_DEVICE inline int64_t sweep_tasks_before(int64_t i, int64_t g) {
  if (i <= 0) return 0;
  const int64_t n = i - 1, q = n / g, r = n % g;
  return 1 + g * q * (q + 1) / 2 + (q + 1) * r;
}
// Tasks of a sweep of `batch` matrices of order m with n columns each, in row blocks of `rows`, panels of `cols`.
inline int64_t sweep_task_count(int64_t batch, int64_t m, int64_t n, int rows, int cols, int64_t segment) {
  return batch * ((n + cols - 1) / cols) * sweep_tasks_before((m + rows - 1) / rows, segment);
}
// Dynamic shared memory of a sweep launch: a tile of L, the inverse of a diagonal block (not in a repair), a block
// of X and one of B.
constexpr size_t sweep_shared_bytes(size_t elem_bytes, int rows, int cols, bool repair) {
  return elem_bytes * ((repair ? 1 : 2) * size_t(rows) * (rows + 1) + 2 * size_t(rows) * cols);
}

}  // namespace hsma
