// complex128 small solve, m <= 64: the seven-stage dual thread-group pipeline of the HSMA-TRSM
// paper ("Hierarchical Shared Memory-Aware Optimization for TRSM on GPU Platforms", small-scale
// regime, double complex). L X = alpha B in the canonical form of trsm_problem.h.
//
// Why: a 64x64 complex128 triangle is exactly 64 KB, so A and B cannot both be on chip within the
// 64 KB a block gets on AMD (the paper's budget, kept here on NVIDIA too). Shared memory is cut into
// four 16 KB regions, each holding one operand block at a time:
//   A (the order padded to 64 with identity) in 2x2 blocks A11, A21, A22 (32x32 each, 16 KB);
//   B, one task's 64-column tile, in row blocks B1..B4 (16 rows x 64 columns each, 16 KB).
// Region layouts (element slots, complex<double>; the XOR swizzles keep both the mover's stores and
// the compute group's reads free of bank conflicts whichever way the global strides run):
//   A block: slot a_slot(i, k) = k*32 + (i ^ (k & 7)), column-major. In A11 and A22 the strict
//            upper triangle is never used: its top-right 16x16 quadrant holds the 32 pivot
//            reciprocals (recip_slot), so no shared memory beyond the 64 KB is needed.
//   B block: slot b_slot(r, j) = r*64 + (j ^ (r & 7)), row-major.
//
// 128 threads, two groups of 64 (two NVIDIA warps, one AMD wavefront each):
//   mover   (threads 64..127): only global <-> shared traffic (applies alpha and conj on the way
//            in, and computes each diagonal pivot's reciprocal as it stores the pivot);
//   compute (threads 0..63):   only arithmetic on shared memory and registers; thread j owns
//            column j of the tile. Its 32 top unknowns stay in registers (x[32], 128 registers)
//            from the top solve to the end of the update; the update runs row by row.
// Every stage ends with one __syncthreads(); within a stage the mover fills operands of a later
// stage while the compute group works on the current one. Regions a, p, q, c (a permutation of the
// four) for one task, with what each group does:
//
//   stage  compute group                          mover group                          a    p    q    c
//   1      -                                      A11 -> a, B1 -> p, B2 -> q           A11  B1   B2   .
//   2      solve X1,X2 = A11^-1 (B1;B2)            A21 -> c                             A11  X1   X2   A21
//   3      -                                      X1, X2 -> global; B3 -> a            B3   .    .    A21
//   4      B3 -= A21[0:16, :] (X1;X2)              B4 -> p                              B3   B4   .    A21
//   5      B4 -= A21[16:32, :] (X1;X2)             A22 -> q                             B3   B4   A22  A21
//   6      solve X3,X4 = A22^-1 (B3;B4)            next task's A11 -> c                 X3   X4   A22  A11'
//   7      -                                      X3, X4 -> global; next B2 -> a,      B2'  .    B1'  A11'
//                                                 next B1 -> q
//
// Stage 1 is only run for a block's first task: stages 6 and 7 load the next task's operands, and
// the regions rotate (a, p, q, c) <- (c, q, a, p). In stage 7 the mover refills region a while
// draining it; each mover thread uses one element-to-slot mapping for both, so it only overwrites
// slots it has already written out. Reads and writes of one stage touch disjoint rows, or
// different tasks, so X may alias B (in-place): every element of B is read before its X is stored.
//
// Tasks are (batch entry, 64-column tile) pairs, taken by a grid-stride loop over as many blocks as
// the device holds at once; columns past n and rows past m are padding (B zero, A identity) and are
// never read from or written to global memory. Entries of L above the diagonal, and the diagonal
// when unit, are never read. Pivots are applied as in the small kernels (small_solve.cuh): the reciprocal is computed
// once per matrix and multiplied, falling back to a division where it would be inexact (zero
// pivots give IEEE inf/nan).
//
// Registers: both groups run one program, so the compute group's x[32] (128 32-bit registers) is
// live in the mover's code of stages 3-5 too. The mover therefore keeps 16 loads in flight in the
// other stages and 8 in those, recomputes its addressing in every stage (opaque()), and the unit
// flag is a template parameter; with these, ptxas (sm_90) and hipcc (gfx90a) report no spills.
// Built only on request: HSMA_TRSM_ABLATION=1 at build time adds this file and the define (setup.py).
#ifndef HSMA_TRSM_ABLATION
#error "small_pipeline.cu is the ablation kernel: build it with -DHSMA_TRSM_ABLATION (HSMA_TRSM_ABLATION=1)"
#endif
#include <atomic>

#include "../trsm_problem.h"

namespace hsma {
namespace {

using C = complex<double>;

constexpr int kGroup = 64;               // threads per group; also the columns of a task's tile
constexpr int kThreads = 2 * kGroup;
constexpr int kHalf = 32;                // order of the A blocks
constexpr int kRowsB = 16;               // rows of a B block
constexpr int kRegionSlots = 1024;       // 16 KB of complex<double>
constexpr int kPipelineSmemBytes = 4 * kRegionSlots * int(sizeof(C));  // 64 KB
constexpr int kSlotsPerMover = kRegionSlots / kGroup;                  // 16
// Global accesses a mover thread keeps in flight: all 16 while the compute group's x[32] is dead
// (stages 1, 2, 6, 7), fewer while it is live (stages 3-5), where registers are short.
constexpr int kWideChunk = kSlotsPerMover;
constexpr int kNarrowChunk = 8;
static_assert(kPipelineSmemBytes == 65536, "four 16 KB regions");
static_assert(kRowsB * kGroup == kRegionSlots && kHalf * kHalf == kRegionSlots, "blocks fill a region");
static_assert(kGroup == 64 && kRowsB == 16 && kHalf == 32, "the element mappings use shifts");

__host__ __device__ constexpr int a_slot(int i, int k) { return k * kHalf + (i ^ (k & 7)); }
__host__ __device__ constexpr int recip_slot(int k) { return a_slot(k & 15, 16 + (k >> 4)); }
__host__ __device__ constexpr int b_slot(int r, int j) { return r * kGroup + (j ^ (r & 7)); }

__device__ inline int64_t iabs64(int64_t v) { return v < 0 ? -v : v; }

// v, through an empty asm the optimiser cannot see through. The mover group's addressing is
// recomputed from it in every stage: otherwise the compiler shares (CSE) or hoists address
// arithmetic across stages, and those values stay live through the compute group's
// register-resident solve (measured with ptxas: hundreds of bytes of spills).
__device__ inline int opaque(int v) {
#if HSMA_HIP
  asm volatile("" : "+v"(v));
#else
  asm volatile("" : "+r"(v));
#endif
  return v;
}

// One task's operands: batch entry pointers and the first column of its tile.
struct TaskRef {
  const C* L;
  const C* B;
  C* X;
  int64_t j0;
};

__device__ inline TaskRef task_ref(const SolveProblem<C>& p, int64_t ntiles, int64_t task) {
  int64_t off[3];
  batch_offsets(p.bl, task / ntiles, off);
  return {p.L + off[0], p.B + off[1], p.X + off[2], (task % ntiles) * kGroup};
}

// ---- mover group (t = 0..63) -----------------------------------------------------------------
// Element e = t + 64 u (u < 16) of a B block, and the (row, column) it holds: with rows_fast, 16
// consecutive threads walk 16 rows of one column, else 64 threads walk one row (consecutive
// threads along the dimension of the global array with the smaller stride: coalesced).
__device__ inline void b_element(int e, bool rows_fast, int& r, int& c) {
  r = rows_fast ? (e & (kRowsB - 1)) : (e >> 6);  // e >= 0: shifts, not signed divisions
  c = rows_fast ? (e >> 4) : (e & (kGroup - 1));
}
// The same for an A block, (i, k): with k_fast, 32 consecutive threads walk one row.
__device__ inline void a_element(int e, bool k_fast, int& i, int& k) {
  i = k_fast ? (e >> 5) : (e & (kHalf - 1));
  k = k_fast ? (e & (kHalf - 1)) : (e >> 5);
}

// Moves a mover thread's kSlotsPerMover elements of a 16 x 64 B block, kChunk at a time: reads
// all kChunk (read(r, c), element (r, c) of the block) before writing any (write(r, c, v)), so
// the kChunk loads are in flight together.
template <int kChunk, typename Read, typename Write>
__device__ inline void move_b_block(bool rows_fast, int lane, Read read, Write write) {
  const int t = opaque(lane);
  for (int u0 = 0; u0 < kSlotsPerMover; u0 += kChunk) {
    C v[kChunk];
#pragma unroll
    for (int u = 0; u < kChunk; ++u) {
      int r, c;
      b_element(t + kGroup * (u0 + u), rows_fast, r, c);
      v[u] = read(r, c);
    }
#pragma unroll
    for (int u = 0; u < kChunk; ++u) {
      int r, c;
      b_element(t + kGroup * (u0 + u), rows_fast, r, c);
      write(r, c, v[u]);
    }
  }
}

// dst <- alpha * B[row0 : row0+16, j0 : j0+64] (zero outside m x n); kChunk loads in flight.
template <int kChunk>
__device__ inline void load_b(C* dst, const TaskRef& tr, const SolveProblem<C>& p, int row0, bool rows_fast, int lane) {
  const int m = static_cast<int>(p.m);
  move_b_block<kChunk>(
      rows_fast, lane,
      [&](int r, int c) {
        const int gi = row0 + r;
        const int64_t gj = tr.j0 + c;
        C v = C(0);
        if (gi < m && gj < p.n) v = p.alpha * tr.B[gi * p.b.row + gj * p.b.col];
        return v;
      },
      [&](int r, int c, C v) { dst[b_slot(r, c)] = v; });
}

// X[row0 : row0+16, j0 : j0+64] <- src, inside m x n only.
template <int kChunk>
__device__ inline void store_x(const C* src, const TaskRef& tr, const SolveProblem<C>& p, int row0, bool rows_fast, int lane) {
  const int m = static_cast<int>(p.m);
  move_b_block<kChunk>(
      rows_fast, lane,
      [&](int r, int c) {
        const C* s = src + b_slot(r, c);
        return C(s->re, s->im);  // member-wise: hipcc keeps a struct copy's buffer in scratch
      },
      [&](int r, int c, C v) {
        const int gi = row0 + r;
        const int64_t gj = tr.j0 + c;
        if (gi < m && gj < p.n) tr.X[gi * p.x.row + gj * p.x.col] = v;
      });
}

// dst <- the 32x32 block of conj?(L) at (row0, col0), identity past m. A diagonal block
// (row0 == col0) stores only its lower triangle, plus the pivot reciprocals; entries of L above
// the diagonal, and a unit diagonal, are never read.
template <bool kUnit, int kChunk>
__device__ inline void load_a(C* dst, const TaskRef& tr, const SolveProblem<C>& p, int row0, int col0, bool k_fast, int lane) {
  const int t = opaque(lane), m = static_cast<int>(p.m);
  const bool diag = row0 == col0;
  for (int u0 = 0; u0 < kSlotsPerMover; u0 += kChunk) {
    C v[kChunk];
#pragma unroll
    for (int u = 0; u < kChunk; ++u) {
      int i, k;
      a_element(t + kGroup * (u0 + u), k_fast, i, k);
      const int gi = row0 + i, gk = col0 + k;
      v[u] = C(gi == gk ? 1 : 0);  // identity padding; a unit diagonal
      if (gi < m && gk < m && (gi > gk || (gi == gk && !kUnit)))
        v[u] = conj_if(tr.L[gi * p.l.row + gk * p.l.col], p.conj);
    }
#pragma unroll
    for (int u = 0; u < kChunk; ++u) {
      int i, k;
      a_element(t + kGroup * (u0 + u), k_fast, i, k);
      if (!diag || i >= k) dst[a_slot(i, k)] = v[u];
      if (diag && i == k && !kUnit) dst[recip_slot(k)] = pivot_reciprocal(v[u]);
    }
  }
}

// ---- compute group (j = 0..63, one column of the tile) ---------------------------------------
// x <- Ad^-1 (lo; hi) for column j, Ad a diagonal block; the solution is also written back over
// lo and hi (for the mover) and stays in x. Fully unrolled over registers when every pivot has a
// usable reciprocal (a multiply per pivot); otherwise (zero, subnormal, huge or non-finite pivots,
// uniform over the block) the same operations in the same order run over lo and hi in shared
// memory, dividing where the reciprocal would be inexact: a per-pivot division branch inside the
// unrolled register solve would spill.
template <bool kUnit>
__device__ inline void solve_block(C (&x)[kHalf], const C* Ad, C* lo, C* hi, int j) {
  bool exact = true;
  if (!kUnit) {
#pragma unroll
    for (int k = 0; k < kHalf; ++k) exact = exact && !is_zero(Ad[recip_slot(k)]);
  }
  if (!exact) {
    auto slot = [lo, hi, j](int i) { return (i < kRowsB ? lo : hi) + b_slot(i & (kRowsB - 1), j); };
#pragma unroll 1
    for (int k = 0; k < kHalf; ++k) {
      const C xk = divide_by_pivot(*slot(k), Ad[a_slot(k, k)], Ad[recip_slot(k)]);
      *slot(k) = xk;
#pragma unroll 1
      for (int i = k + 1; i < kHalf; ++i) *slot(i) = fms(*slot(i), Ad[a_slot(i, k)], xk);
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsB; ++r) {
    x[r] = lo[b_slot(r, j)];
    x[kRowsB + r] = hi[b_slot(r, j)];
  }
  if (!exact) return;
#pragma unroll
  for (int k = 0; k < kHalf; ++k) {
    if (!kUnit) x[k] = x[k] * Ad[recip_slot(k)];
#pragma unroll
    for (int i = k + 1; i < kHalf; ++i) x[i] = fms(x[i], Ad[a_slot(i, k)], x[k]);
  }
#pragma unroll
  for (int r = 0; r < kRowsB; ++r) {
    lo[b_slot(r, j)] = x[r];
    hi[b_slot(r, j)] = x[kRowsB + r];
  }
}

// Bt -= A21[row0 : row0+16, :] x for column j; rows in fours for independent chains.
__device__ inline void update_block(const C (&x)[kHalf], const C* A21, int row0, C* Bt, int j) {
  constexpr int kRows = 4;
#pragma unroll
  for (int r0 = 0; r0 < kRowsB; r0 += kRows) {
    C acc[kRows];
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) acc[rr] = Bt[b_slot(r0 + rr, j)];
#pragma unroll
    for (int k = 0; k < kHalf; ++k) {
#pragma unroll
      for (int rr = 0; rr < kRows; ++rr) acc[rr] = fms(acc[rr], A21[a_slot(row0 + r0 + rr, k)], x[k]);
    }
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) Bt[b_slot(r0 + rr, j)] = acc[rr];
  }
}

// kUnit: p.unit, as a template parameter: a uniform branch per pivot inside the unrolled
// register solve splits it into scheduling regions and spills (hipcc, and nvcc likewise).
template <bool kUnit>
__global__ void __launch_bounds__(kThreads)
small_pipeline_kernel(SolveProblem<C> p, int64_t ntiles) {
  extern __shared__ unsigned char smem_raw[];
  C* const smem = reinterpret_cast<C*>(smem_raw);
  const int tid = static_cast<int>(threadIdx.x);
  const bool mover = tid >= kGroup;
  const int t = tid & (kGroup - 1);  // mover: element lane; compute: column of the tile
  const int64_t ntasks = p.batch * ntiles;
  int64_t task = blockIdx.x;
  if (task >= ntasks) return;  // the whole block

  const bool a_k_fast = iabs64(p.l.col) <= iabs64(p.l.row);
  const bool b_rows_fast = iabs64(p.b.row) < iabs64(p.b.col);
  const bool x_rows_fast = iabs64(p.x.row) < iabs64(p.x.col);
  int ra = 0, rp = 1, rq = 2, rc = 3;  // regions a, p, q, c of the stage table
  auto region = [smem](int r) { return smem + r * kRegionSlots; };

  TaskRef cur = task_ref(p, ntiles, task), nxt = cur;
  // Stage 1, for the block's first task (later ones are loaded by stages 6 and 7 of the previous).
  if (mover) {
    load_a<kUnit, kWideChunk>(region(ra), cur, p, 0, 0, a_k_fast, t);
    load_b<kWideChunk>(region(rp), cur, p, 0, b_rows_fast, t);
    load_b<kWideChunk>(region(rq), cur, p, kRowsB, b_rows_fast, t);
  }
  __syncthreads();

  for (;;) {
    const int64_t next = task + gridDim.x;
    const bool has_next = next < ntasks;
    // Compute group: X1, X2 of its column (stages 2-5), then X3, X4 (stage 6). Defined on every
    // path (the movers' zeros are never used) so that it is live only from stage 2 to stage 5.
    C x[kHalf];
#pragma unroll
    for (int r = 0; r < kHalf; ++r) x[r] = C(0);

    // Stage 2: solve the top 32 rows with A11 | stream A21.
    if (!mover) solve_block<kUnit>(x, region(ra), region(rp), region(rq), t);
    else load_a<kUnit, kWideChunk>(region(rc), cur, p, kHalf, 0, a_k_fast, t);
    __syncthreads();

    // Stage 3: X1, X2 to global memory, B3 where A11 was.
    if (mover) {
      store_x<kNarrowChunk>(region(rp), cur, p, 0, x_rows_fast, t);
      store_x<kNarrowChunk>(region(rq), cur, p, kRowsB, x_rows_fast, t);
      load_b<kNarrowChunk>(region(ra), cur, p, 2 * kRowsB, b_rows_fast, t);
    }
    __syncthreads();

    // Stage 4: B3 -= A21[0:16, :] X(1,2) | B4 where X1 was.
    if (!mover) update_block(x, region(rc), 0, region(ra), t);
    else load_b<kNarrowChunk>(region(rp), cur, p, 3 * kRowsB, b_rows_fast, t);
    __syncthreads();

    // Stage 5: B4 -= A21[16:32, :] X(1,2) | stream A22 where X2 was.
    if (!mover) update_block(x, region(rc), kRowsB, region(rp), t);
    else load_a<kUnit, kNarrowChunk>(region(rq), cur, p, kHalf, kHalf, a_k_fast, t);
    __syncthreads();

    // Stage 6: solve the bottom 32 rows with A22 | the next task's A11 where A21 was.
    if (has_next) nxt = task_ref(p, ntiles, next);
    if (!mover) solve_block<kUnit>(x, region(rq), region(ra), region(rp), t);
    else if (has_next) load_a<kUnit, kWideChunk>(region(rc), nxt, p, 0, 0, a_k_fast, t);
    __syncthreads();

    // Stage 7: X3, X4 to global memory | the next task's B2 over X3 (with X3's element mapping,
    // so each thread refills only slots it has already drained) and B1 where A22 was.
    if (mover) {
      store_x<kWideChunk>(region(ra), cur, p, 2 * kRowsB, x_rows_fast, t);
      if (has_next) load_b<kWideChunk>(region(ra), nxt, p, kRowsB, x_rows_fast, t);
      store_x<kWideChunk>(region(rp), cur, p, 3 * kRowsB, x_rows_fast, t);
      if (has_next) load_b<kWideChunk>(region(rq), nxt, p, 0, b_rows_fast, t);
    }
    __syncthreads();

    if (!has_next) break;
    const int a = ra;
    ra = rc;  // A11'
    rc = rp;  // free
    rp = rq;  // B1'
    rq = a;   // B2'
    task = next;
    cur = nxt;
  }
}

// Launches one instantiation, opted in to 64 KB of dynamic shared memory (resident_blocks).
template <bool kUnit>
hsmaError_t launch_pipeline(const SolveProblem<C>& p, hsmaStream_t stream) {
  static std::atomic<int> blocks_per_sm[64];  // 0: not configured yet
  int per_sm = 0;
  const hsmaError_t err = resident_blocks(reinterpret_cast<const void*>(&small_pipeline_kernel<kUnit>), kThreads,
                                          kPipelineSmemBytes, blocks_per_sm, &per_sm);
  if (err != hsmaSuccess) return err;
  const DeviceInfo& info = current_device_info();
  const int64_t ntiles = (p.n + kGroup - 1) / kGroup;
  const int64_t ntasks = p.batch * ntiles;
  int64_t blocks = int64_t(per_sm) * info.multiprocessors;
  if (blocks > ntasks) blocks = ntasks;
  small_pipeline_kernel<kUnit><<<small_grid(p, blocks), kThreads, kPipelineSmemBytes, stream>>>(p, ntiles);
  return hsmaGetLastError();
}

}  // namespace

hsmaError_t launch_small_pipeline(const SolveProblem<complex<double>>& p, hsmaStream_t stream) {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return hsmaSuccess;
  if (p.m > kSmallMaxM) return hsmaError_t(1);
  return p.unit ? launch_pipeline<true>(p, stream) : launch_pipeline<false>(p, stream);
}

}  // namespace hsma
