// The normalised problem the kernels solve (the kernels' ABI), and the launchers' declarations.
//
// No torch headers here: the kernel sources compile alone with nvcc or hipcc. The torch-facing
// code (csrc/cuda/canonical.h) turns every (side, uplo, trans, diag) into one canonical form:
//
//     L X = alpha B,   L lower triangular m x m, X and B m x n, for each batch entry,
//
// reached purely through signed element strides: a transposed A is A with its strides swapped,
// an upper A is a lower one read from its last element backwards (negative strides), a right-side
// solve is the left-side solve of the transposes, and a conjugate (trans = 'C' or a conj view)
// is a flag applied when L is loaded.
#pragma once
#include <cstdint>

#include "limits.h"
#include "portable.cuh"
#include "small/knobs.h"  // SmallKernel, the small-path knobs

namespace hsma {

constexpr int kMaxBatchDims = 4;

// Batch dimensions after broadcasting (size-1 dims dropped, contiguous runs merged).
// Element offset of batch entry b in tensor t: sum_d idx_d(b) * stride[t][d].
struct BatchLayout {
  int ndim = 0;
  int64_t size[kMaxBatchDims] = {1, 1, 1, 1};
  int64_t stride[3][kMaxBatchDims] = {};  // [0] = L (A), [1] = B, [2] = X
};

__host__ __device__ inline void batch_offsets(const BatchLayout& bl, int64_t b, int64_t off[3]) {
  off[0] = off[1] = off[2] = 0;
  for (int d = bl.ndim - 1; d > 0; --d) {
    int64_t i = b % bl.size[d];
    b /= bl.size[d];
    off[0] += i * bl.stride[0][d];
    off[1] += i * bl.stride[1][d];
    off[2] += i * bl.stride[2][d];
  }
  if (bl.ndim > 0) {  // b < size[0] now: the outermost dim needs no division
    off[0] += b * bl.stride[0][0];
    off[1] += b * bl.stride[1][0];
    off[2] += b * bl.stride[2][0];
  }
}

// Element (i, j) of a matrix is at ptr + i * row + j * col (element units, signed).
struct MatrixRef {
  int64_t row = 0, col = 0;
};

// L X = alpha B with L lower triangular (through strides), for `batch` entries. T: the arithmetic
// type; SA: L's stored type, SB: B's and X's (T, or bfloat16_bits / float16_bits for T = float:
// the kernels widen each element as they load it and round each result once as they store it).
template <typename T, typename SA = T, typename SB = SA>
struct SolveProblem {
  int64_t m = 0, n = 0, batch = 1;
  const SA* L = nullptr; MatrixRef l;
  const SB* B = nullptr; MatrixRef b;
  SB* X = nullptr;       MatrixRef x;  // may alias B (in-place solve): each element is read before written
  BatchLayout bl;
  bool conj = false;   // use conj(L)
  bool unit = false;   // diagonal of L is 1 and never read
  T alpha = T(1);
  // The small-path knobs (small/knobs.h: kernel, segment_lanes, ..., dependent_launch, max_blocks), copied from
  // the plan; their defaults are the launcher's choices.
  HSMA_SMALL_KNOB_FIELDS
};

// The grid of a small-path (or inverse) launch that wants `blocks` blocks: at most 2^31 - 1 and
// p.max_blocks where set (each kernel's grid-stride loop takes the tasks beyond).
template <typename Problem>
inline unsigned small_grid(const Problem& p, int64_t blocks) {
  int64_t cap = 0x7fffffff;
  if (p.max_blocks > 0 && p.max_blocks < cap) cap = p.max_blocks;
  return static_cast<unsigned>(blocks < cap ? blocks : cap);
}

// Inverses of the diagonal blocks of a triangular matrix T (m x m, through strides): block k of
// batch entry b, inv(T[k*NB:(k+1)*NB, same]), is written row-major with row pitch out_pitch at
// out + b * out_batch_stride + k * out_block_stride, in the top-left sz x sz corner of an NB x NB
// tile (sz = NB except for a shorter last block); the rest of the tile is zero.
// `upper`: T is upper triangular (the kernel reads it as a lower one, backwards).
template <typename T>
struct DiagInverseProblem {
  int64_t m = 0, nb = 0, batch = 1;
  const T* A = nullptr; MatrixRef a; int64_t a_batch_stride = 0;
  T* out = nullptr;
  int64_t out_pitch = 0, out_block_stride = 0, out_batch_stride = 0;
  bool upper = false, conj = false, unit = false;
  // When set, task t (batch entry, block, panel of columns) writes inaccurate[t] = 1 if an entry
  // it wrote is inf, nan or subnormal, else 0 (the blocked path's repair reads them).
  int* inaccurate = nullptr;
};

// Columns of inv(D) per task of the inversion, as many as fit in registers at 1024 threads; and
// its tasks: (batch entry, block, panel of those columns).
template <typename T> __host__ __device__ constexpr int diag_inverse_panel() { return sizeof(T) >= 16 ? 4 : 8; }
template <typename T> int64_t diag_inverse_tasks(const DiagInverseProblem<T>& p) {
  const int64_t w = diag_inverse_panel<T>();
  return p.batch * ((p.m + p.nb - 1) / p.nb) * ((p.nb + w - 1) / w);
}

// The sweep (kernels/sweep.cu): L X = alpha B for orders above 64 and panels of at most 16 columns,
// in one launch that reads L once per panel. L's rows are cut into blocks of R (`rows`); a task
// multiplies up to G (`segment`) blocks of its row block by solved blocks of X as they become ready,
// and the last task of each row block (its owner) applies the block's inverse, which it computes
// (or substitutes).
// Batch entries: e * *_batch elements apart (0: shared); the panels of B's columns are independent
// chains of the same solve.
template <typename T>
struct SweepProblem {
  int64_t m = 0, n = 0, batch = 1;
  const T* L = nullptr; MatrixRef l; int64_t l_batch = 0;
  const T* B = nullptr; MatrixRef b; int64_t b_batch = 0;
  T* X = nullptr;       MatrixRef x; int64_t x_batch = 0;  // may alias B: the owner reads B_i before writing X_i
  bool conj = false, unit = false;
  T alpha = T(1);
  int rows = 64;     // R: 64, or 128 (float only)
  int cols = 8;      // NC: columns per panel, 1, 2, 4, 8 or 16
  int segment = 4;   // G: column blocks per task
  // Workspace, sweep_workspace_words(p) 64-bit words, zeroed: a ticket counter, then the solved
  // blocks of X and the tasks' partial sums as tagged words (sweep.cu).
  unsigned long long* work = nullptr;
  // The blocked path's repair (one block of threads, G >= blocks - 1, substitution in every
  // diagonal block): nothing unless one of repair[0 .. repair_count) is set (the launch then
  // zeroes `work` itself), and only the batch entries whose triangle has a flag set (repair_count /
  // the triangle's batch entries flags each, in order).
  const int* repair = nullptr;
  int64_t repair_count = 0, repair_per_entry = 0;
  int64_t max_blocks = 0;     // cap on the grid (tests)
};

template <typename T> int64_t sweep_blocks(const SweepProblem<T>& p) { return (p.m + p.rows - 1) / p.rows; }
template <typename T> int64_t sweep_chains(const SweepProblem<T>& p) { return p.batch * ((p.n + p.cols - 1) / p.cols); }
template <typename T> int64_t sweep_tasks(const SweepProblem<T>& p) {
  return sweep_chains(p) * sweep_tasks_before(sweep_blocks(p), p.segment);
}
// A value of X or of a partial sum is exchanged as sizeof(T) / 4 words: 32 bits of it beside a tag.
// (A repair solves one chain after another in one block: one chain's area, reused.)
template <typename T> int64_t sweep_exchange_words(const SweepProblem<T>& p) {
  return (p.repair != nullptr ? 1 : sweep_chains(p)) * sweep_blocks(p) * p.rows * p.cols * int64_t(sizeof(T) / 4);
}
template <typename T> int64_t sweep_partial_words(const SweepProblem<T>& p) {
  return p.segment < sweep_blocks(p) - 1 ? sweep_tasks(p) * p.rows * p.cols * int64_t(sizeof(T) / 4) : 0;
}
template <typename T> int64_t sweep_workspace_words(const SweepProblem<T>& p) {
  return 1 + sweep_exchange_words(p) + sweep_partial_words(p);
}
// Dynamic shared memory of a launch: a tile of L, the inverse of a diagonal block (not in a repair),
// a block of X and one of B; and whether it fits the current device (sweep.cu).
template <typename T> size_t sweep_shared_bytes(const SweepProblem<T>& p) {
  return sweep_shared_bytes(sizeof(T), p.rows, p.cols, p.repair != nullptr);
}
template <typename T> bool sweep_fits(const SweepProblem<T>& p) {
  return sweep_shared_bytes(p) <= size_t(current_device_info().shared_optin);
}

// inv(L) for lower triangular L of order k <= kInverseMaxK (LAPACK's trtri, batched; an upper
// triangle is read backwards by the host, as in the solves), written whole: zeros above the
// diagonal. Only L's lower triangle is used (not its diagonal when `unit`); 16-byte pieces of a
// row that cross the diagonal are loaded whole and their other entries discarded. S: the stored
// type of L, O: the inverse's (float, double, bfloat16_bits, float16_bits; arithmetic in
// compute_of<S>).
template <typename S, typename O>
struct InverseProblem {
  int64_t k = 0, batch = 1;
  const S* L = nullptr; MatrixRef l;
  O* X = nullptr;       MatrixRef x;
  BatchLayout bl;  // strides [0] of L, [2] of X
  bool unit = false;
  int64_t max_blocks = 0;  // cap on the grid (tests)
};
constexpr int64_t kInverseMaxK = 64;

// The permutation of LAPACK's pivots (kernels/permutation.cu): pivots, batch x k int32 (contiguous, 1-based)
// -> out, batch x k int64: perm with P[perm[j], j] = 1 for A = P L U, or with `inverse` its inverse. Orders
// up to kPermutationMaxK (the pivots and the permutation in the default 48 KB of shared memory), batches up to
// kPermutationMaxBatch (one block each: HIP wants fewer than 2^32 threads in a grid).
constexpr int64_t kPermutationMaxK = 6144;
constexpr int64_t kPermutationMaxBatch = int64_t(1) << 24;
hsmaError_t launch_lu_permutation(const int32_t* pivots, int64_t batch, int64_t k, int64_t* out, bool inverse,
                                  hsmaStream_t stream);

// Launchers (defined in the .cu files, explicitly instantiated for float, double,
// complex<float>, complex<double>). They return the launch error, hsmaSuccess when all is well.
template <typename T, typename SA, typename SB>
hsmaError_t launch_small_solve(const SolveProblem<T, SA, SB>& p, hsmaStream_t stream);
template <typename T> hsmaError_t launch_diag_inverse(const DiagInverseProblem<T>& p, hsmaStream_t stream);
template <typename T> hsmaError_t launch_sweep(const SweepProblem<T>& p, hsmaStream_t stream);
// The blocked path's repair (p.repair set; kernels/sweep.cu): the sweep kernel in its repair mode, one block.
template <typename T> hsmaError_t launch_sweep_repair(const SweepProblem<T>& p, hsmaStream_t stream);
template <typename S, typename O> hsmaError_t launch_tri_inverse(const InverseProblem<S, O>& p, hsmaStream_t stream);
#ifdef HSMA_TRSM_ABLATION
// complex128 with m <= 64, only when small_kernel=pipeline is asked for: the HSMA-TRSM paper's seven-stage
// pipeline over a 64 KB shared-memory partition, two thread groups (ablation/small_pipeline.cu).
hsmaError_t launch_small_pipeline(const SolveProblem<complex<double>>& p, hsmaStream_t stream);
#endif

}  // namespace hsma
