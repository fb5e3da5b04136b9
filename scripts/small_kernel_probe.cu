// Kernel time of small-path kernels alone, without torch (a development probe, not the
// benchmark): CUDA events around each launch after 5 warm-up ones, and the residual
// ||L X - B|| / ||B|| of the first 8 entries. Built on a machine without a GPU and run on one, to
// compare builds of different revisions of the header:
//     nvcc -std=c++17 -O3 -arch=sm_90 [-DPROBE_COLUMNS=1] [-DNEWAPI_ON=1] [-DVARIANT='"name"']
//          -I<dir with small_solve.cuh, portable.cuh, trsm_problem.h> scripts/small_kernel_probe.cu -o probe
// Default: the 8-lane segment kernels, batch 4096 of 64x64 complex64 (n = 64, and 128 unit
// columns) and of 48x48 complex128, 30 launches each; NEWAPI_ON=1 calls launch_narrow_segments
// (the launcher's choice of columns per segment, since 5fcc99f), 0 launch_segments<T, M, 8> (older
// headers). PROBE_COLUMNS=1: the column kernel (launch_columns), batch 10000 of 32x32
// complex128, 50 launches, three rounds. PROBE_TILES=1: the tile kernel (launch_tiles, or
// launch_tiles_as at another block size), batch 4096 of 64x64 and 48x48 complex128 (also at 1 and
// 2 steps per loop iteration) and of 64x64 complex64 (64 columns, 128 unit columns; also in blocks
// of 128 threads), two rounds. The headers need no extra flags (not --expt-relaxed-constexpr,
// which torch's build adds); data from a 64-bit xorshift (a batch is generated in well under a
// second). benchmarks/results/probe_*.txt.
#include "small_solve.cuh"
#ifndef PROBE_COLUMNS
#define PROBE_COLUMNS 0
#endif
#ifndef PROBE_TILES
#define PROBE_TILES 0
#endif
#include <cstdio>
#include <vector>
#include <cmath>
#include <cstring>
using namespace hsma;
// Uniform in [-sqrt(3), sqrt(3)) (unit variance) from a 64-bit xorshift: fast enough that a
// batch of 4096 64x128 systems is generated in well under a second.
inline double unif(uint64_t& g) {
  g ^= g << 13; g ^= g >> 7; g ^= g << 17;
  return (double(g >> 11) * 0x1.0p-53 * 2 - 1) * 1.7320508075688772;
}
template <typename T> T rnd(uint64_t& g) {
  const double re = unif(g), im = unif(g);
  if constexpr (sizeof(T) == 8) return T(float(re), float(im));
  else return T(re, im);
}
// PROBE_TILES: threads per block of the tile kernel (0: the launcher's choice; 64, 128, 256 with
// as many column tiles as that leaves).
static int g_tile_threads = 0;
// PROBE_TILES: the tile kernel's steps per loop iteration (0: the launcher's choice; 1, 2, 4).
static int g_tile_steps = 0;
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
        T v = rnd<T>(g); using R = decltype(v.re);
        v.re /= R(std::sqrt(double(m))); v.im /= R(std::sqrt(double(m)));
        if (i == k) v.re += R(2);
        L[(b * m + i) * m + k] = k <= i ? v : T(NAN, NAN);
      }
  for (auto& v : B) v = rnd<T>(g);
  T *dL, *dB, *dX;
  cudaMalloc(&dL, L.size() * sizeof(T)); cudaMalloc(&dB, B.size() * sizeof(T)); cudaMalloc(&dX, B.size() * sizeof(T));
  cudaMemcpy(dL, L.data(), L.size() * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemcpy(dB, B.data(), B.size() * sizeof(T), cudaMemcpyHostToDevice);
  SolveProblem<T> p; p.m = m; p.n = n; p.batch = batch; p.L = dL; p.l = {m, 1}; p.B = dB; p.b = {n, 1}; p.X = dX; p.x = {n, 1};
  p.bl.ndim = 1; p.bl.size[0] = batch; p.bl.stride[0][0] = int64_t(m) * m; p.bl.stride[1][0] = int64_t(m) * n; p.bl.stride[2][0] = int64_t(m) * n;
  p.unit = unit;
  if (g_tile_steps) {
    p.kernel = SmallKernel::kTiles;
    p.segment_steps = g_tile_steps;
  }
  const DeviceInfo dev = current_device_info();
  auto launch = [&] {
#if PROBE_TILES
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
  std::vector<T> X(B.size());
  cudaMemcpy(X.data(), dX, X.size() * sizeof(T), cudaMemcpyDeviceToHost);
  double num = 0, den = 0;  // residual of the first 8 entries: ||L X - B|| / ||B||
  for (int64_t b = 0; b < 8; ++b)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double re = 0, im = 0;
        for (int k = 0; k <= i; ++k) {
          T l = (unit && k == i) ? T(1, 0) : L[(b * m + i) * m + k]; T x = X[(b * m + k) * n + j];
          re += double(l.re) * x.re - double(l.im) * x.im; im += double(l.re) * x.im + double(l.im) * x.re;
        }
        T bb = B[(b * m + i) * n + j];
        num += (re - bb.re) * (re - bb.re) + (im - bb.im) * (im - bb.im); den += double(bb.re) * bb.re + double(bb.im) * bb.im;
      }
  printf("%-48s mean %8.2f us  min %8.2f us  resid %.2e  err %s\n", name, 1000 * total / reps, 1000 * best, std::sqrt(num / den),
         cudaGetErrorString(cudaGetLastError()));
  cudaFree(dL); cudaFree(dB); cudaFree(dX);
}
#ifndef VARIANT
#define VARIANT ""
#endif
int main() {
  cudaFree(0);
#if PROBE_TILES
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
