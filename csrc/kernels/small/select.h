// Which small-path kernel runs a problem (m <= 64): the kernel family, the order it is compiled for
// and its variant, chosen by a pure function of the problem's shape, the device and the overrides
// (SolveProblem's fields, which the dispatcher fills from the overrides, csrc/overrides.h; nothing here reads the
// environment). small_solve.cuh runs the plan through the family's launcher, which sizes the grid.
// Plain C++17 without CUDA, HIP or torch headers: tests/test_small_selection.py compiles this file
// on the host alone and checks a table of shapes against the expected plans.
#pragma once
#include <cstdint>

#include "knobs.h"  // SmallKernel, the knobs

namespace hsma {

enum class SmallDtype : int { kFloat32, kFloat64, kComplex64, kComplex128 };

constexpr int small_dtype_bytes(SmallDtype t) {
  return t == SmallDtype::kFloat32 ? 4 : t == SmallDtype::kComplex128 ? 16 : 8;
}
constexpr bool small_dtype_complex(SmallDtype t) { return t == SmallDtype::kComplex64 || t == SmallDtype::kComplex128; }

// A small-path problem as the selection sees it.
struct SmallShape {
  SmallDtype dtype = SmallDtype::kFloat32;
  int64_t m = 0, n = 0, batch = 1;
  bool a_shared = true;     // one A serves every task: a single solve, or A broadcast over the batch
  bool l_row_major = true;  // L's rows contiguous-ish: |column stride| <= |row stride|
  bool l_16bit = false;     // L stored in bfloat16 / float16 (widened to dtype as it is staged)
  // The knobs (knobs.h), as SolveProblem carries them (kAuto, 0 or -1: the selection's choice).
  HSMA_SMALL_KNOB_FIELDS
};

// The device as the selection sees it.
struct SmallDevice {
  int multiprocessors = 0;
  int cc_major = 0;        // compute capability (major) on CUDA; 0 on AMD
  bool hip = false;        // an AMD build (HSMA_HIP)
  bool sm90_code = false;  // the kernels' code on this GPU is for compute_90 or newer (kernels_wait)
};

enum class SmallFamily : int {
  kColumns,
  kSegments,
  kWarpTasks,
  kTiles,
  kMma,
#ifdef HSMA_TRSM_ABLATION
  kPipeline,
#endif
};

// The kernel to run: its family and the compile-time parameters of the instance. Fields that do not
// apply to the family are 0 / false.
struct SmallPlan {
  SmallFamily family = SmallFamily::kColumns;
  int rows = 0;     // M, the order the kernel is compiled for (L padded with the identity up to it)
  int threads = 0;  // threads per block (the column kernel's: sized at launch)
  // Column kernel
  int column_rows = 0;     // H: rows of a column a thread holds at once (M, or M / 2: the split kernel)
  bool row_major = false;  // L staged by rows (the dot-product form), else by columns (the axpy form)
  bool packed = false;     // the triangle packed in shared memory (ColumnLayout)
  // Segment kernels
  int lanes = 0;          // lanes per column: 8 (narrow), 32 (strided warp-wide), M / 2 (blocked)
  bool blocked = false;   // a lane's rows contiguous (substitute_segment_blocked)
  int columns = 0;        // columns per segment
  int steps = 0;          // blocked segments, tile kernel: substitution steps per loop iteration
  // Tensor-core kernel
  int warps = 0;
  bool fold = false;      // the folding variant (A's inverses reused across tasks)
};

// Block shapes.
constexpr int kSmallThreads = 256;     // strided and 8-lane segment kernels
constexpr int kBlockedThreads = 128;   // blocked segments: a few columns per block, spread over more SMs
constexpr int kWarpTaskThreads = 128;  // warp-task kernel: one matrix per warp
constexpr int kTileThreads = 256;      // tile kernel, eight warps (four for narrow B)
constexpr int kSegment = 32;           // lanes per column of warp-wide segments (also on 64-wide wavefronts)
// Lanes per column of the segment kernel for complex batches: 8, chosen over 2, 4 and 32 lanes and
// the column kernel at batches of 32x32 and 64x64 on the H200 (docs/experiments.md).
constexpr int kNarrowSegment = 8;

// Thresholds.
constexpr int kColumnMaxBytes = 512;             // M * sizeof(T) for the column kernel's registers
constexpr int64_t kFewColumns = 2048;            // batch * n up to which m > 16 takes the segment kernel
constexpr int64_t kWarpTaskMaxColumns = 4;       // columns per matrix up to which a batch takes one warp per matrix
constexpr int kWarpTaskMinBatchPerSM = 4;        // ... with at least this many matrices per multiprocessor
// Steps per loop iteration of the blocked substitution (substitute_segment_blocked) at M = 64,
// unless forced (override segment_steps): 4, faster there than fully unrolled; at M = 32 (16 steps)
// it stays fully unrolled, faster there than 4 steps for every dtype (docs/experiments.md).
constexpr int kBlockedSteps64 = 4;

// 8-lane segments (narrow segments) are built and chosen on CUDA only. On AMD (64-wide wavefronts;
// clang does not fully unroll the complex 8-lane substitution, so its rows would leave registers)
// the selection keeps the choices it had before them: the column kernel where it fits, else
// warp-wide segments.
constexpr bool small_narrow_segments(const SmallDevice& d) { return !d.hip; }

// Rows per lane of warp-wide segments unless forced (override segment_rows): 2 contiguous rows
// (the blocked substitution, M / 2 lanes per column), faster on single solves than strided rows at
// every order and dtype, and than 4 rows per lane (16 lanes; docs/experiments.md). Tuned on the
// H200 only; AMD keeps strided rows. Besides single solves this covers the other few-column cases
// given to warp-wide segments (batch * n <= kFewColumns; batches of one or two 8- or 16-byte
// columns below the warp-task threshold), which are not tuned on their own.
constexpr int small_blocked_rows(const SmallDevice& d) { return d.hip ? 1 : 2; }

// Whether a column of M rows fits one column-kernel thread's registers.
constexpr bool column_fits(SmallDtype t, int M) { return M * small_dtype_bytes(t) <= kColumnMaxBytes; }

// The split kernels whose triangle is packed and whose registers are capped for occupancy:
// row-major float64, and row-major complex64 at 64 rows (column.cuh: column_packed_capped).
constexpr bool column_split_capped(SmallDtype t, int M, int H, bool row_major) {
  return H < M && row_major && (t == SmallDtype::kFloat64 || (t == SmallDtype::kComplex64 && M == 64));
}
// The column kernel's triangle packed in shared memory (ColumnLayout): the split kernels of 16-byte
// types and the capped ones.
constexpr bool column_packed(SmallDtype t, int M, int H, bool row_major) {
  return (H < M && small_dtype_bytes(t) >= 16) || column_split_capped(t, M, H, row_major);
}
// float32's split kernel packs its triangle too (rows padded to 16 bytes: 8.5 KB instead of 16)
// where A is batched, but not where one A serves the call, where packing is slower
// (docs/experiments.md), so the layout is chosen at run time. (Row-major L; tuned on the H200 only,
// AMD does not pack.)
constexpr bool column_packs_batched_a(SmallDtype t, int M, int H, bool hip) {
  return !hip && H < M && t == SmallDtype::kFloat32;
}

// Whether the warp-task kernel's four packed triangles of M rows fit its shared memory.
constexpr bool warp_tasks_fit(SmallDtype t, int M) {
  return (kWarpTaskThreads / kSegment) * (M * (M + 1) / 2 + M) * small_dtype_bytes(t) <= 46 * 1024;
}

// Columns per 8-lane segment: two for complex128 at 33-48 rows, one elsewhere (segment.cuh,
// small_solve_segments_kernel, says why).
constexpr int segment_columns(SmallDtype t, int M) { return t == SmallDtype::kComplex128 && M == 48 ? 2 : 1; }

// The tile kernel: columns per warp (tiles.cuh: tile_warp_cols), and substitution steps per loop
// iteration unless forced: one for 8-byte types, four for complex128, whose lanes hold one column,
// so a step is half the code (the faster count for each: docs/experiments.md).
constexpr int tile_columns(SmallDtype t) { return 8 * (small_dtype_bytes(t) >= 16 ? 1 : 2); }
constexpr int tile_steps(SmallDtype t) { return small_dtype_bytes(t) >= 16 ? 4 : 1; }

// The tensor-core kernel runs where the GPU has FP64 mma.sync (sm_80+; not built for AMD).
constexpr bool mma_supported(const SmallDevice& d) { return !d.hip && d.cc_major >= 8; }
// Whether its code on this GPU pairs the row blocks' products (dmma_rows: m16n8k4, compiled where
// the code is for a virtual architecture of 9.0 or newer).
constexpr bool mma_pairs(const SmallDevice& d) { return mma_supported(d) && d.cc_major >= 9 && d.sm90_code; }

// The column kernel of M rows, H at a time, in the layout of L's triangle in shared memory: rows
// when L's rows are contiguous-ish, packed or not.
inline SmallPlan column_plan(const SmallShape& s, const SmallDevice& d, int M, int H) {
  SmallPlan plan;
  plan.family = SmallFamily::kColumns;
  plan.rows = M;
  plan.column_rows = H;
  plan.row_major = s.l_row_major;
  plan.packed = s.l_row_major && column_packs_batched_a(s.dtype, M, H, d.hip) && !s.a_shared
                    ? true
                    : column_packed(s.dtype, M, H, s.l_row_major);
  return plan;
}

// The segment kernel of M rows with `lanes` lanes per column: 8-lane segments where built; warp-wide
// segments (lanes = 32) blocked with `rows` = 2 contiguous rows per lane (M / 2 lanes per column),
// `steps` steps per loop iteration (0: kBlockedSteps64 at M = 64, unrolled at 32), else strided.
inline SmallPlan segment_plan(const SmallShape& s, const SmallDevice& d, int M, int lanes, int rows, int steps) {
  SmallPlan plan;
  plan.family = SmallFamily::kSegments;
  plan.rows = M;
  plan.columns = 1;
  if (small_narrow_segments(d) && lanes == kNarrowSegment) {
    plan.lanes = kNarrowSegment;
    plan.threads = kSmallThreads;
    plan.columns = segment_columns(s.dtype, M);
  } else if (lanes == kSegment && rows == 2) {
    plan.lanes = M / 2;
    plan.blocked = true;
    plan.threads = kBlockedThreads;
    const int want = steps ? steps : M == 64 ? kBlockedSteps64 : M / 2;
    plan.steps = want == 1 || want == 2 || want == 4 ? want : M / 2;
  } else {
    plan.lanes = kSegment;
    plan.threads = kSmallThreads;
  }
  return plan;
}

// The tile kernel: four warps for B of at most 4 tile_columns columns, else eight; steps per
// loop iteration p.segment_steps where the kernel is forced and it is 1, 2 or 4, else tile_steps.
inline SmallPlan tile_plan(const SmallShape& s) {
  SmallPlan plan;
  plan.family = SmallFamily::kTiles;
  plan.rows = 64;
  plan.threads = s.n <= (kTileThreads / 2 / 32) * tile_columns(s.dtype) ? kTileThreads / 2 : kTileThreads;
  const bool forced =
      s.kernel == SmallKernel::kTiles && (s.segment_steps == 1 || s.segment_steps == 2 || s.segment_steps == 4);
  plan.steps = forced ? s.segment_steps : tile_steps(s.dtype);
  return plan;
}

// The tensor-core kernel of M rows. Four warps (32 columns per task) for B of at most 32 columns,
// for complex128 at 64 rows (161-168 registers and 3 blocks per multiprocessor against 128 with
// spills and 2: docs/experiments.md) and for A broadcast over a batch, else
// eight (64 columns per task), unless forced (mma_warps). The folding variant where one A serves
// every task, or a matrix has several column tiles (unless mma_fold = 0), or where forced
// (mma_fold = 1: also one tile per matrix, each task folding its own A).
inline SmallPlan mma_plan(const SmallShape& s, int M) {
  SmallPlan plan;
  plan.family = SmallFamily::kMma;
  plan.rows = M;
  const bool narrow = s.n <= 4 * 8 || (small_dtype_bytes(s.dtype) >= 16 && M == 64) || (s.a_shared && s.batch > 1);
  const int warps = s.mma_warps ? s.mma_warps : narrow ? 4 : 8;
  const int64_t tile_cols = warps * 8;
  const int64_t ntiles = (s.n + tile_cols - 1) / tile_cols;
  plan.warps = warps == 4 ? 4 : 8;
  plan.threads = plan.warps * 32;
  plan.fold = s.a_shared || s.mma_fold == 1 || (ntiles > 1 && s.mma_fold != 0);
  return plan;
}

// The choice, for 1 <= m <= 64.
inline SmallPlan choose_small_kernel(const SmallShape& s, const SmallDevice& d) {
  const SmallDtype t = s.dtype;
  const int bytes = small_dtype_bytes(t);
  const bool complex = small_dtype_complex(t), complex64 = t == SmallDtype::kComplex64;
  const bool narrow_built = small_narrow_segments(d);
  const bool many = s.batch >= int64_t(kWarpTaskMinBatchPerSM) * d.multiprocessors;
#ifdef HSMA_TRSM_ABLATION
  if (t == SmallDtype::kComplex128 && s.kernel == SmallKernel::kPipeline) {
    // The paper's seven-stage pipeline for complex128, only on request (an ablation build).
    SmallPlan plan;
    plan.family = SmallFamily::kPipeline;
    plan.rows = 64;
    return plan;
  }
#endif
  // The segment kernel spreads each column's substitution over a segment's lanes, the column
  // kernel runs it on one thread. Warp-wide segments win for a few columns of a triangle beyond 16
  // rows (a single solve) and for batches of single vectors in 8- and 16-byte types; 8-lane
  // segments for complex solves with more columns in all (batch * n > kFewColumns: batches, or one
  // wide B) of orders beyond 48 (complex64) or 32 (complex128), where a column fills too many of
  // one thread's registers (below them the column kernel is faster: docs/experiments.md). Large
  // complex batches take the tile kernel or the tensor-core kernel instead where those are faster
  // (below). Without 8-lane segments (AMD), complex64 beyond 48 rows takes warp-wide
  // segments unless a batch has more than 64 columns per matrix.
  const bool few_columns =
      s.m > 16 && (s.batch * s.n <= kFewColumns || (s.n <= 2 && bytes >= 8) ||
                   (!narrow_built && complex64 && s.m > 48 && (s.n <= 64 || s.batch == 1)));
  const bool narrow_segments = narrow_built && !few_columns && complex && s.m > (complex64 ? 48 : 32);
  // Large batches of a few columns each: one matrix per warp (the warp-task segment kernel), except
  // float32 batches beyond kFewColumns columns in all, which the column kernel takes (faster there:
  // docs/experiments.md).
  const bool warp_tasks_wanted =
      s.kernel == SmallKernel::kWarpTasks ||
      (s.kernel == SmallKernel::kAuto && s.m > 16 && (bytes >= 8 || s.batch * s.n <= kFewColumns) &&
       s.n <= kWarpTaskMaxColumns && many);
  // The tile kernel at 33-64 rows when forced (small_kernel=tiles); unforced, for large
  // complex batches (at least 4 matrices per multiprocessor): complex64 of 49-64 rows with 64
  // columns or more per matrix (not at 48 rows, where the column kernel is faster); complex128 of
  // 33-64 rows with A batched and 48-128 columns per matrix, and of 49-64 rows with 48 or more
  // columns, wherever the tensor-core kernel is not taken (below: before sm_80, with column_rows
  // set, and for A batched with 48-128 columns per matrix where its products do not go in pairs:
  // mma_pairs). There it is faster than the 8-lane segments (docs/experiments.md). Both kernels
  // pad (the tile kernel to 64 rows, the segments to 48), so their times are taken to be flat over
  // 33-48 rows, tuned at 48 rows only, as are widths of 48-63 columns. Tuned on the H200 only; AMD
  // does not take it.
  const bool tiles_wanted =
      s.kernel == SmallKernel::kTiles ||
      (s.kernel == SmallKernel::kAuto && !d.hip && complex &&
       (complex64 ? s.m > 48 && s.n >= 64 : s.m > 32 && s.n >= 48 && (s.m > 48 || (s.n <= 128 && !s.a_shared))) &&
       s.segment_lanes == 0 && many);
  if (!d.hip && (t == SmallDtype::kFloat64 || t == SmallDtype::kComplex128)) {
    // The tensor-core kernel where forced (small_kernel=mma); for complex128 solves of
    // 49-64 rows with many columns in all (batches; one wide B), and of 33-48 rows where the tile
    // kernel would be taken (large batches, A batched, 48-128 columns per matrix; the tensor-core
    // kernel pads them to 64 rows), where its row-block products go in pairs (mma_pairs; without
    // them the tile kernel, faster there, keeps those batches); for float64 ones of 49-64 rows with
    // one A for every task and 64 columns or more per matrix. There it is faster than the tile
    // kernel (docs/experiments.md). Not for float64 with A batched (the column kernel is faster) or
    // complex128 at 32 rows.
    const bool tiles_first = tiles_wanted && s.n <= 128 && !s.a_shared && !mma_pairs(d);  // (complex128)
    const bool mma_wanted =
        s.kernel == SmallKernel::kMma ||
        (s.kernel == SmallKernel::kAuto && !few_columns && s.segment_lanes == 0 && s.column_rows == 0 &&
         (t == SmallDtype::kComplex128 ? !tiles_first && (s.m > 48 || (tiles_wanted && s.m > 32))
                                       : s.m > 48 && s.n >= 64 && s.a_shared));
    if (mma_wanted && mma_supported(d)) return mma_plan(s, s.m <= 32 ? 32 : 64);
  }
  if (tiles_wanted && s.m > 32) return tile_plan(s);
  if (warp_tasks_wanted) {
    const int M = s.m <= 32 ? 32 : 64;
    if (warp_tasks_fit(t, M)) {
      SmallPlan plan;
      plan.family = SmallFamily::kWarpTasks;
      plan.rows = M;
      plan.threads = kWarpTaskThreads;
      plan.lanes = kSegment;
      plan.columns = 1;
      return plan;
    }
  }
  if (s.kernel == SmallKernel::kColumns ||
      (s.kernel != SmallKernel::kSegments && !few_columns && !narrow_segments && s.segment_lanes == 0)) {
    if (s.m <= 8) return column_plan(s, d, 8, 8);
    if (s.m <= 16) return column_plan(s, d, 16, 16);
    if (s.m <= 32) {
      // 17-32 rows of a complex type, 16 at a time (the split kernel), when asked for
      // (column_rows = 16) or for complex64 batches of at least 4 matrices per multiprocessor: 93
      // registers instead of 123 let 5 blocks of 128 threads run per multiprocessor instead of 4
      // (docs/experiments.md). complex128 keeps whole columns (its split is no faster). Tuned on
      // the H200 only; AMD keeps whole columns.
      const bool split16 = complex && (s.column_rows == 16 || (!d.hip && complex64 && s.column_rows == 0 && many));
      return split16 ? column_plan(s, d, 32, 16) : column_plan(s, d, 32, 32);
    }
    // 33-64 rows: whole columns in registers where they fit (real types, complex64), unless the
    // split kernel, which holds 32 rows at a time, is asked for (column_rows = 16 or 32) or faster
    // (tuned on the H200 only; AMD keeps whole columns): float64 and float32 at 49-64 rows
    // (float32's split kernel needs 114 registers, not 142; docs/experiments.md), but not a 16-bit
    // L, which the split kernel stages through registers (145 of them, 3 blocks per SM): whole
    // columns there (b4096 64x64 bf16 on the H100: 113 against 136 us; docs/experiments.md).
    // Complex128, whose column does not fit, takes the split kernel only when the column kernel is
    // forced; else the segment kernel.
    const bool split = (s.column_rows != 0 && s.column_rows <= 32) ||
                       (!d.hip && s.column_rows == 0 && s.m > 48 && !s.l_16bit &&
                        (t == SmallDtype::kFloat64 || t == SmallDtype::kFloat32));
    if (!split) {
      if (column_fits(t, 48) && s.m <= 48) return column_plan(s, d, 48, 48);
      if (column_fits(t, 64)) return column_plan(s, d, 64, 64);
    }
    if (split || s.kernel == SmallKernel::kColumns) return column_plan(s, d, 64, 32);
  }
  // segment_lanes forces the segment kernel with that many lanes per column (8 runs as 32 where
  // 8-lane segments are not built: AMD).
  const int lanes = s.segment_lanes          ? s.segment_lanes
                    : narrow_segments && s.kernel != SmallKernel::kSegments ? kNarrowSegment
                                                                           : kSegment;
  const int rows = s.segment_rows ? s.segment_rows : small_blocked_rows(d);  // (warp-wide segments only)
  if (s.m <= 32) return segment_plan(s, d, 32, lanes, rows, s.segment_steps);
  // 33-48 rows with 8-lane segments (complex128 batches, or forced): 6 rows per lane (padding to
  // 64 would do 1.8x the work; docs/experiments.md).
  if (narrow_built && complex && s.m <= 48 && lanes == kNarrowSegment) return segment_plan(s, d, 48, lanes, rows, 0);
  return segment_plan(s, d, 64, lanes, rows, s.segment_steps);
}

}  // namespace hsma
