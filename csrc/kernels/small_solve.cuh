// Small-scale direct solve (the HSMA-TRSM paper's small regime, m <= 64): L X = alpha B with the
// whole triangle of L in shared memory. Kernels of one family, chosen by the launcher: the column
// kernel (small/column.cuh), the segment kernel (small/segment.cuh), and two more described at
// their definitions: the tensor-core kernel (small/mma.cuh), for complex128 batches of 49-64 rows on
// sm_80+ (and on sm_90+ of 33-48 rows in large batches with A batched and 48-128 columns per
// matrix), and the register-tiled tile kernel (small/tiles.cuh), for complex64 batches of 49-64
// rows with 64 or more columns per matrix and complex128 ones that the tensor-core kernel does not
// take; see launch_small_solve.
//
// All take the division off the critical path: each pivot's reciprocal is computed once per
// matrix while the triangle is loaded, and x_k is multiplied by it, unless only a true division
// is exact enough there (zero, subnormal, huge or non-finite pivots; see pivot_reciprocal).
// The kernels and launcher are templates here; small_solve_<dtype>.cu instantiate one data type
// each, so that the four compile in parallel.
#pragma once
#include "small/column.cuh"
#include "small/mma.cuh"
#include "small/segment.cuh"
#include "small/tiles.cuh"

namespace hsma {
namespace {

constexpr int kColumnMaxBytes = 512;  // M * sizeof(T) for the column kernel's registers
constexpr int64_t kFewColumns = 2048;  // batch * n up to which m > 16 takes the segment kernel
constexpr int64_t kWarpTaskMaxColumns = 4;    // columns per matrix up to which a batch takes one warp per matrix
constexpr int kWarpTaskMinBatchPerSM = 4;     // ... when there are at least this many matrices per multiprocessor

}  // namespace
}  // namespace hsma

namespace hsma {

template <typename T>
hsmaError_t launch_small_solve(const SolveProblem<T>& p, hsmaStream_t stream) {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return hsmaSuccess;
  if (p.m > kSmallMaxM) return hsmaError_t(1);
  const DeviceInfo dev = current_device_info();
  if constexpr (std::is_same_v<T, complex<double>>) {
    // The paper's seven-stage pipeline for complex128 at m = 64, on request (ablations): on the
    // H200 the segment kernel was faster, single and batched.
    if (p.kernel == SmallKernel::kPipeline) return launch_small_pipeline(p, stream);
  }
  // The segment kernel spreads each column's substitution over a segment's lanes, the column
  // kernel runs it on one thread. Warp-wide segments win for a few columns of a triangle beyond 16
  // rows (a single solve) and for batches of single vectors in 8- and 16-byte types; 8-lane
  // segments for complex solves with more columns in all (batch * n > kFewColumns: batches, or one
  // wide B) of orders beyond 48 (complex64) or 32 (complex128), where a column fills too many of
  // one thread's registers (below them the column kernel won: H200, batch 10000 of 32x32 complex64,
  // 105 vs 155 us). Large complex batches take the tile kernel or the tensor-core kernel instead
  // where they won (below).
  // Without 8-lane segments (AMD), complex64 beyond 48 rows takes warp-wide segments unless a
  // batch has more than 64 columns per matrix.
  constexpr bool kComplex = std::is_same_v<T, complex<float>> || std::is_same_v<T, complex<double>>;
  constexpr bool kComplex64 = std::is_same_v<T, complex<float>>;
  const bool few_columns =
      p.m > 16 && (p.batch * p.n <= kFewColumns || (p.n <= 2 && sizeof(T) >= 8) ||
                   (!kNarrowSegments && kComplex64 && p.m > 48 && (p.n <= 64 || p.batch == 1)));
  const bool narrow_segments = kNarrowSegments && !few_columns && kComplex && p.m > (kComplex64 ? 48 : 32);
  // Large batches of a few columns each: one matrix per warp (the warp-task segment kernel), except
  // float32 batches beyond kFewColumns columns in all, which the column kernel takes (it won there:
  // batch 10000 of 32x32, n = 1, 26 vs 37 us on the H200).
  const bool warp_tasks_wanted = p.kernel == SmallKernel::kWarpTasks ||
                                 (p.kernel == SmallKernel::kAuto && p.m > 16 &&
                                  (sizeof(T) >= 8 || p.batch * p.n <= kFewColumns) &&
                                  p.n <= kWarpTaskMaxColumns &&
                                  p.batch >= int64_t(kWarpTaskMinBatchPerSM) * dev.multiprocessors);
  // The tile kernel at 33-64 rows when forced (HSMA_TRSM_SMALL_KERNEL=tiles); unforced, for large
  // complex batches (at least 4 matrices per multiprocessor): complex64 of 49-64 rows with 64
  // columns or more per matrix (not at 48 rows, where the column kernel won); complex128 of 33-64
  // rows with A batched and 48-128 columns per matrix, and of 49-64 rows with 48 or more columns,
  // wherever the tensor-core kernel is not taken (below: before sm_80, with HSMA_TRSM_COLUMN_ROWS
  // set, and for A batched with 48-128 columns per matrix where its products do not go in pairs:
  // mma_pairs). H200, batch 4096 of 64x64 complex64: 204 us against 332 for the 8-lane segments.
  // Both kernels pad (the tile kernel to 64 rows, the segments to 48), so their times are taken to
  // be flat over 33-48 rows, where only 48 was measured; widths of 48-63 columns were measured at
  // 48 rows only. Kept off AMD, where it was not measured.
  const bool tiles_wanted = p.kernel == SmallKernel::kTiles ||
                            (p.kernel == SmallKernel::kAuto && !HSMA_HIP && kComplex &&
                             (kComplex64 ? p.m > 48 && p.n >= 64
                                         : p.m > 32 && p.n >= 48 && (p.m > 48 || (p.n <= 128 && !shares_a(p)))) &&
                             p.segment_lanes == 0 &&
                             p.batch >= int64_t(kWarpTaskMinBatchPerSM) * dev.multiprocessors);
  if constexpr (!HSMA_HIP && (std::is_same_v<T, double> || std::is_same_v<T, complex<double>>)) {
    // The tensor-core kernel where forced (HSMA_TRSM_SMALL_KERNEL=mma); for complex128 solves of
    // 49-64 rows with many columns in all (batches; one wide B), and of 33-48 rows where the tile
    // kernel would be taken (large batches, A batched, 48-128 columns per matrix; the tensor-core
    // kernel pads them to 64 rows), where its row-block products go in pairs (mma_pairs; without
    // them the tile kernel keeps those batches, where it was faster); for float64 ones of 49-64
    // rows with one A for every task and 64 columns or more per matrix (shares_a). H200, batch 4096
    // of 64x64 complex128: 284 us against 303 for the tile kernel. Not for float64 with A batched
    // (the column kernel won) or complex128 at 32 rows.
    const bool tiles_first = tiles_wanted && p.n <= 128 && !shares_a(p) && !mma_pairs(dev);  // (complex128)
    const bool mma_wanted = p.kernel == SmallKernel::kMma ||
                            (p.kernel == SmallKernel::kAuto && !few_columns && p.segment_lanes == 0 &&
                             p.column_rows == 0 &&
                             (std::is_same_v<T, complex<double>>
                                  ? !tiles_first && (p.m > 48 || (tiles_wanted && p.m > 32))
                                  : p.m > 48 && p.n >= 64 && shares_a(p)));
    if (mma_wanted && mma_supported(dev)) {
      if (p.m <= 32) return launch_mma<T, 32>(p, dev, stream);
      return launch_mma<T, 64>(p, dev, stream);
    }
  }
  if (tiles_wanted && p.m > 32) return launch_tiles<T>(p, dev, stream);
  if (warp_tasks_wanted) {
    if (p.m <= 32) {
      if constexpr (warp_tasks_fit<T, 32>()) return launch_warp_tasks<T, 32>(p, dev, stream);
    } else {
      if constexpr (warp_tasks_fit<T, 64>()) return launch_warp_tasks<T, 64>(p, dev, stream);
    }
  }
  if (p.kernel == SmallKernel::kColumns ||
      (p.kernel != SmallKernel::kSegments && !few_columns && !narrow_segments && p.segment_lanes == 0)) {
    if (p.m <= 8) return launch_columns<T, 8>(p, dev, stream);
    if (p.m <= 16) return launch_columns<T, 16>(p, dev, stream);
    if (p.m <= 32) {
      // 17-32 rows of a complex type, 16 at a time (the split kernel), when asked for
      // (HSMA_TRSM_COLUMN_ROWS=16) or for complex64 batches of at least 4 matrices per
      // multiprocessor: 93 registers instead of 123 let 5 blocks of 128 threads run per
      // multiprocessor instead of 4 (H200, batch 10000 of 32x32 complex64: 73.9 vs 77.9 us).
      // complex128 keeps whole columns (its split did not win). Kept off AMD, where it was not
      // measured.
      if constexpr (kComplex) {
        const bool split16 = p.column_rows == 16 ||
                             (!HSMA_HIP && kComplex64 && p.column_rows == 0 &&
                              p.batch >= int64_t(kWarpTaskMinBatchPerSM) * dev.multiprocessors);
        if (split16) return launch_columns<T, 32, 16>(p, dev, stream);
      }
      return launch_columns<T, 32>(p, dev, stream);
    }
    // 33-64 rows: whole columns in registers where they fit (real types, complex64), unless the
    // split kernel, which holds 32 rows at a time, is asked for (HSMA_TRSM_COLUMN_ROWS=32:
    // p.column_rows) or measured better on the H200 (kept off AMD, where it was not measured):
    // float64 and float32 at 49-64 rows (float32's split kernel needs 114 registers, not 142; batch
    // 4096 of 64x64: float64 132.7 vs 140.2 us, float32 69.6 vs 77.9). Complex128, whose column does
    // not fit, takes the split kernel only when the column kernel is forced; else the segment kernel.
    const bool split = (p.column_rows != 0 && p.column_rows <= 32) ||
                       (!HSMA_HIP && p.column_rows == 0 && p.m > 48 &&
                        (std::is_same_v<T, double> || std::is_same_v<T, float>));
    if (!split) {
      if constexpr (48 * sizeof(T) <= kColumnMaxBytes) {
        if (p.m <= 48) return launch_columns<T, 48>(p, dev, stream);
      }
      if constexpr (64 * sizeof(T) <= kColumnMaxBytes) {
        if (p.m <= 64) return launch_columns<T, 64>(p, dev, stream);
      }
    }
    if (split || p.kernel == SmallKernel::kColumns) return launch_columns<T, 64, 32>(p, dev, stream);
  }
  // HSMA_TRSM_SEGMENT_LANES (p.segment_lanes) forces the segment kernel with that many lanes per
  // column (8 runs as 32 where 8-lane segments are not built: AMD).
  const int lanes = p.segment_lanes ? p.segment_lanes
                                    : narrow_segments && p.kernel != SmallKernel::kSegments ? kNarrowSegment : kSegment;
  const int rows = p.segment_rows ? p.segment_rows : kBlockedRows;  // (warp-wide segments only)
  const int steps = p.segment_steps;
  if (p.m <= 32) return launch_segments<T, 32>(p, dev, stream, lanes, rows, steps);
  // 33-48 rows with 8-lane segments (complex128 batches, or forced): 6 rows per lane (padding to
  // 64 would do 1.8x the work: batch 4096 of 48x48 complex128 515 us padded, 350 at 48 rows).
  if constexpr (kNarrowSegments && kComplex) {
    if (p.m <= 48 && lanes == kNarrowSegment) return launch_narrow_segments<T, 48>(p, dev, stream);
  }
  return launch_segments<T, 64>(p, dev, stream, lanes, rows, steps);
}
}  // namespace hsma
