// Kernel time of small-path kernels alone, without torch (a development probe, not the
// benchmark): CUDA events around each launch after 5 warm-up ones, and the residual
// ||L X - B|| / ||B|| of the first 8 entries. Built on a machine without a GPU and run on one, to
// compare builds of different revisions of the header:
//     nvcc -std=c++17 -O3 -arch=sm_90 [-DPROBE_COLUMNS=1 | -DPROBE_TILES=1 | -DPROBE_MMA=1 | -DPROBE_SINGLE=1]
//          [-DNEWAPI_ON=1]
//          [-DVARIANT='"name"']
//          -I<dir with small_solve.cuh, portable.cuh, trsm_problem.h> scripts/probes/small_kernel_probe.cu -o probe
// Default: the 8-lane segment kernels, batch 4096 of 64x64 complex64 (n = 64, and 128 unit
// columns) and of 48x48 complex128, 30 launches each; NEWAPI_ON=1 calls launch_narrow_segments
// (the launcher's choice of columns per segment, since 5fcc99f), 0 launch_segments<T, M, 8> (older
// headers). PROBE_COLUMNS=1: the column kernel (launch_columns), batch 10000 of 32x32
// complex128, 50 launches, three rounds. PROBE_TILES=1: the tile kernel (launch_tiles, or
// launch_tiles_as at another block size), batch 4096 of 64x64 and 48x48 complex128 (also at 1 and
// 2 steps per loop iteration) and of 64x64 complex64 (64 columns, 128 unit columns; also in blocks
// of 128 threads), two rounds. PROBE_MMA=1: batch 4096 of complex128 (64x64 with 64, 48 and 128
// unit columns, 56x56, 48x48, A broadcast) and float64 (64x64, 128 unit columns, A broadcast)
// through the launcher (launch_small_solve), the tensor-core kernel forced (launch_mma at 64
// padded rows; also with its fold forced) and, for complex128, the tile kernel; two rounds (the
// pipeline kernel is stubbed out: its source is not built in). PROBE_SINGLE=1: single solves
// (batch 1) of 64x64 complex128 (16, 64, 256 columns) and float64 (64 columns), the launcher's
// choice against the tensor-core kernel forced (at its launcher's warps per block and, for
// complex128, at 8), three rounds, each case also timed from a CUDA graph of 100 launches (GPU
// time per call, as the benchmark's GPU-only column). The headers need no extra flags (not --expt-relaxed-constexpr,
// which torch's build adds); data from a 64-bit xorshift (a batch is generated in well under a
// second). Past runs: docs/experiments.md.
#include "small_solve.cuh"
#ifndef PROBE_COLUMNS
#define PROBE_COLUMNS 0
#endif
#ifndef PROBE_TILES
#define PROBE_TILES 0
#endif
#ifndef PROBE_MMA
#define PROBE_MMA 0
#endif
#ifndef PROBE_SINGLE
#define PROBE_SINGLE 0
#endif
#if PROBE_SINGLE
#undef PROBE_MMA
#define PROBE_MMA 1
#endif
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
using namespace hsma;
#if PROBE_MMA  // (launch_small_solve's pipeline, in small_pipeline.cu: never asked for here)
hsmaError_t hsma::launch_small_pipeline(const SolveProblem<complex<double>>&, hsmaStream_t) { return hsmaError_t(1); }
#endif
// Uniform in [-sqrt(3), sqrt(3)) (unit variance) from a 64-bit xorshift: fast enough that a
// batch of 4096 64x128 systems is generated in well under a second.
inline double unif(uint64_t& g) {
  g ^= g << 13; g ^= g >> 7; g ^= g << 17;
  return (double(g >> 11) * 0x1.0p-53 * 2 - 1) * 1.7320508075688772;
}
template <typename T> constexpr bool kReal = std::is_arithmetic_v<T>;
template <typename T> T make(double re, double im) {
  if constexpr (kReal<T>) return T(re);
  else if constexpr (sizeof(T) == 8) return T(float(re), float(im));
  else return T(re, im);
}
template <typename T> double re_of(T v) { if constexpr (kReal<T>) return v; else return v.re; }
template <typename T> double im_of(T v) { if constexpr (kReal<T>) return 0; else return v.im; }
template <typename T> T rnd(uint64_t& g) {
  const double re = unif(g), im = unif(g);
  return make<T>(re, im);
}
// PROBE_TILES: threads per block of the tile kernel (0: the launcher's choice; 64, 128, 256 with
// as many column tiles as that leaves).
static int g_tile_threads = 0;
// PROBE_TILES: the tile kernel's steps per loop iteration (0: the launcher's choice; 1, 2, 4).
static int g_tile_steps = 0;
// PROBE_MMA: the kernel (g_kernel: the launcher's choice, launch_mma at 64 padded rows, or
// launch_tiles), the tensor-core kernel's fold (-1 the launcher's, 0, 1), A broadcast over the
// batch (stride 0).
#if PROBE_MMA
enum class Probe { kAuto, kMma, kTiles };
static Probe g_kernel = Probe::kAuto;
#endif
static int g_mma_fold = -1, g_mma_warps = 0;
#if PROBE_MMA
static hsmaStream_t g_stream = 0;  // (a stream of its own for the graph timing of PROBE_SINGLE)
#endif
static bool g_a_broadcast = false;
#if PROBE_TILES
template <typename T>
hsmaError_t launch_tiles_with(const SolveProblem<T>& p, const DeviceInfo& dev) {
  if (g_tile_threads == 0) return launch_tiles<T>(p, dev, 0);
  const int64_t cols = (g_tile_threads / 32) * tile_warp_cols<T>(), ntiles = (p.n + cols - 1) / cols;
  if (g_tile_threads == 64) return launch_tiles_as<T, 64>(p, dev, 0, ntiles);
  if (g_tile_threads == 128) return launch_tiles_as<T, 128>(p, dev, 0, ntiles);
  return launch_tiles_as<T, 256>(p, dev, 0, ntiles);
}
#endif
template <typename T, int M>
void run(const char* name0, int64_t batch, int m, int n, bool unit) {
  char name[96];
  snprintf(name, sizeof name, "%s", name0);
  if (g_tile_threads) snprintf(name + strlen(name), sizeof name - strlen(name), " threads=%d", g_tile_threads);
  if (g_tile_steps) snprintf(name + strlen(name), sizeof name - strlen(name), " steps=%d", g_tile_steps);
  uint64_t g = 88172645463325252ull;
  std::vector<T> L(batch * m * m), B(batch * m * n);
  for (int64_t b = 0; b < batch; ++b)
    for (int i = 0; i < m; ++i)
      for (int k = 0; k < m; ++k) {
        const double re = unif(g) / std::sqrt(double(m)) + (i == k ? 2 : 0), im = unif(g) / std::sqrt(double(m));
        L[(b * m + i) * m + k] = k <= i ? make<T>(re, im) : make<T>(NAN, NAN);
      }
  for (auto& v : B) v = rnd<T>(g);
  T *dL, *dB, *dX;
  cudaMalloc(&dL, L.size() * sizeof(T)); cudaMalloc(&dB, B.size() * sizeof(T)); cudaMalloc(&dX, B.size() * sizeof(T));
  cudaMemcpy(dL, L.data(), L.size() * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemcpy(dB, B.data(), B.size() * sizeof(T), cudaMemcpyHostToDevice);
  SolveProblem<T> p; p.m = m; p.n = n; p.batch = batch; p.L = dL; p.l = {m, 1}; p.B = dB; p.b = {n, 1}; p.X = dX; p.x = {n, 1};
  p.bl.ndim = 1; p.bl.size[0] = batch; p.bl.stride[0][0] = int64_t(m) * m; p.bl.stride[1][0] = int64_t(m) * n; p.bl.stride[2][0] = int64_t(m) * n;
  p.unit = unit;
  if (g_a_broadcast) p.bl.stride[0][0] = 0;
  p.mma_fold = g_mma_fold;
  p.mma_warps = g_mma_warps;
  if (g_tile_steps) {
    p.kernel = SmallKernel::kTiles;
    p.segment_steps = g_tile_steps;
  }
  const DeviceInfo dev = current_device_info();
  auto launch = [&] {
#if PROBE_MMA
    if (g_kernel == Probe::kAuto) return launch_small_solve<T>(p, g_stream);
    if constexpr (!kReal<T>)
      if (g_kernel == Probe::kTiles) return launch_tiles<T>(p, dev, g_stream);
    return launch_mma<T, 64>(p, dev, g_stream);
#elif PROBE_TILES
    return launch_tiles_with<T>(p, dev);
#elif PROBE_COLUMNS
    return launch_columns<T, M>(p, dev, 0);
#elif NEWAPI_ON
    return launch_narrow_segments<T, M>(p, dev, 0);
#else
    return launch_segments<T, M, 8>(p, dev, 0);
#endif
  };
  for (int i = 0; i < 5; ++i) launch();
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  float best = 1e30f, total = 0; const int reps = PROBE_COLUMNS ? 50 : 30;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(e0); launch(); cudaEventRecord(e1); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1); total += ms; best = ms < best ? ms : best;
  }
  float graph_us = 0;
#if PROBE_SINGLE
  {  // GPU time per call: 100 launches captured into one graph, the median of 20 replays
    constexpr int kCalls = 100, kReplays = 20;
    cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    bool ok = cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    for (int i = 0; ok && i < kCalls; ++i) ok = launch() == hsmaSuccess;
    ok = cudaStreamEndCapture(g_stream, &graph) == cudaSuccess && ok;  // (ends a capture that failed, too)
    ok = ok && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    ok = ok && cudaGraphLaunch(exec, g_stream) == cudaSuccess && cudaStreamSynchronize(g_stream) == cudaSuccess;
    std::vector<float> t(kReplays);
    for (auto& v : t) {
      if (!ok) break;
      cudaEventRecord(e0, g_stream); cudaGraphLaunch(exec, g_stream); cudaEventRecord(e1, g_stream);
      ok = cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&v, e0, e1) == cudaSuccess;
    }
    std::sort(t.begin(), t.end());
    graph_us = ok ? 1000 * t[kReplays / 2] / kCalls : -1;  // (-1: no graph time, see err)
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    cudaStreamDestroy(g_stream);
    g_stream = 0;
  }
#endif
  std::vector<T> X(B.size());
  cudaMemcpy(X.data(), dX, X.size() * sizeof(T), cudaMemcpyDeviceToHost);
  double num = 0, den = 0;  // residual of the first 8 entries: ||L X - B|| / ||B||
  for (int64_t b = 0; b < std::min<int64_t>(batch, 8); ++b)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double re = 0, im = 0;
        for (int k = 0; k <= i; ++k) {
          T l = (unit && k == i) ? make<T>(1, 0) : L[((g_a_broadcast ? 0 : b) * m + i) * m + k]; T x = X[(b * m + k) * n + j];
          re += re_of(l) * re_of(x) - im_of(l) * im_of(x); im += re_of(l) * im_of(x) + im_of(l) * re_of(x);
        }
        T bb = B[(b * m + i) * n + j];
        num += (re - re_of(bb)) * (re - re_of(bb)) + (im - im_of(bb)) * (im - im_of(bb));
        den += re_of(bb) * re_of(bb) + im_of(bb) * im_of(bb);
      }
  printf("%-48s mean %8.2f us  min %8.2f us  resid %.2e  err %s", name, 1000 * total / reps, 1000 * best, std::sqrt(num / den),
         cudaGetErrorString(cudaGetLastError()));
  if (graph_us > 0) printf("  graph %6.2f us", graph_us);
  if (graph_us < 0) printf("  graph failed");
  printf("\n");
  cudaFree(dL); cudaFree(dB); cudaFree(dX);
}
#ifndef VARIANT
#define VARIANT ""
#endif
int main() {
  cudaFree(0);
#if PROBE_SINGLE
  // Single solves (batch 1) of complex128 and float64: the launcher's choice (warp-wide segments
  // for these few columns), the tensor-core kernel forced (launch_mma at 64 padded rows: it folds,
  // one A for every task) at the launcher's warps per block (complex128 4, float64 8) and, for
  // complex128, at 8; three rounds.
  for (int round = 0; round < 3; ++round) {
    auto single = [&](auto tag, int m, int n) {
      using T = decltype(tag);
      const char* type = kReal<T> ? "f64" : "c128";
      char buf[128];
      // (variant 1: the launcher's warps, 4 for complex128, 8 for float64, whose variant 2 would repeat it)
      for (int variant = 0; variant < (kReal<T> ? 2 : 3); ++variant) {
        g_kernel = variant == 0 ? Probe::kAuto : Probe::kMma;
        g_mma_warps = variant == 2 ? 8 : 0;
        const char* kind[] = {"auto", "mma", "mma-8w"};
        snprintf(buf, sizeof buf, "%s %s %-9s %dx%d n=%d", VARIANT, type, kind[variant], m, m, n);
        run<T, 64>(buf, 1, m, n, false);
      }
      g_kernel = Probe::kAuto; g_mma_warps = 0;
    };
    for (int n : {16, 64, 256}) single(complex<double>(), 64, n);
    single(double(), 64, 64);
  }
#elif PROBE_MMA
  // complex128 where the tensor-core and tile kernels compete, float64 where the tensor-core and
  // column kernels do: the launcher's choice, each kernel forced, and the fold forced.
  struct Case { int m, n; bool unit, broadcast; };
  auto label = [](const char* type, const char* kind, const Case& c, int fold) {
    static char buf[128];
    snprintf(buf, sizeof buf, "%s %s %-5s fold=%-2d b=4096 %dx%d n=%d%s%s", VARIANT, type, kind, fold, c.m, c.m, c.n,
             c.unit ? " unit" : "", c.broadcast ? " A broadcast" : "");
    return buf;
  };
  auto sweep = [&](auto tag, const Case& c, std::initializer_list<Probe> kernels) {
    using T = decltype(tag);
    const char* type = kReal<T> ? "f64" : "c128";
    g_a_broadcast = c.broadcast;
    for (Probe k : kernels) {
      g_kernel = k;
      const char* kind = k == Probe::kAuto ? "auto" : k == Probe::kMma ? "mma" : "tiles";
      run<T, 64>(label(type, kind, c, -1), 4096, c.m, c.n, c.unit);
    }
    g_kernel = Probe::kMma;
    g_mma_fold = 1;
    run<T, 64>(label(type, "mma", c, 1), 4096, c.m, c.n, c.unit);
    g_mma_fold = -1;
    g_a_broadcast = false;
  };
  for (int round = 0; round < 2; ++round) {
    for (Case c : {Case{64, 64, false, false}, Case{64, 128, true, false}, Case{64, 48, false, false},
                   Case{56, 64, false, false}, Case{48, 48, false, false}, Case{64, 64, false, true}})
      sweep(complex<double>(), c, {Probe::kAuto, Probe::kMma, Probe::kTiles});
    for (Case c : {Case{64, 64, false, false}, Case{64, 128, true, false}, Case{64, 64, false, true}})
      sweep(double(), c, {Probe::kAuto, Probe::kMma});
  }
#elif PROBE_TILES
  // Batch 4096 of the tile kernel's shapes, at the launcher's steps and block size, at other steps
  // and at smaller blocks (more column tiles per matrix, each block staging the whole triangle).
  for (int round = 0; round < 2; ++round) {
    g_tile_threads = 0;
    for (int steps : {0, 1, 2}) {
      g_tile_steps = steps;
      run<complex<double>, 64>(VARIANT " c128 b=4096 64x64 n=64", 4096, 64, 64, false);
      run<complex<double>, 48>(VARIANT " c128 b=4096 48x48 n=48", 4096, 48, 48, false);
      run<complex<double>, 64>(VARIANT " c128 b=4096 64x64 n=128 unit", 4096, 64, 128, true);
    }
    g_tile_steps = 0;
    for (int threads : {0, 128}) {
      g_tile_threads = threads;
      run<complex<float>, 64>(VARIANT " c64 b=4096 64x64 n=64", 4096, 64, 64, false);
      run<complex<float>, 64>(VARIANT " c64 b=4096 64x64 n=128 unit", 4096, 64, 128, true);
    }
  }
  g_tile_threads = 0;
#elif PROBE_COLUMNS
  for (int round = 0; round < 3; ++round)
    run<complex<double>, 32>(VARIANT " c128 b=10000 32x32 n=32", 10000, 32, 32, false);
#else
  for (int round = 0; round < 2; ++round) {
    run<complex<float>, 64>("c64 b=4096 64x64 n=64", 4096, 64, 64, false);
    run<complex<float>, 64>("c64 b=4096 64x64 n=128 unit", 4096, 64, 128, true);
    run<complex<double>, 48>("c128 b=4096 48x48 n=48", 4096, 48, 48, false);
  }
#endif
  return 0;
}
