// Checks hsma::dmma (csrc/kernels/small_solve.cuh), the tensor-core kernel's one m8n8k4 FP64
// product, against a host 8x8x4 product, in either of its two paths. On a GPU machine:
//   nvcc -std=c++17 -arch=sm_90 -Icsrc -o dmma_mma scripts/probes/dmma_check.cu && ./dmma_mma
//   nvcc -std=c++17 -arch=sm_90 -Icsrc -DHSMA_EMULATE_DMMA -o dmma_emu scripts/probes/dmma_check.cu && ./dmma_emu
// (the second: the shuffle fallback of builds without FP64 mma.sync). Exit status 0 when the
// largest error is below 1e-12.
#include <cmath>
#include <cstdio>

#include "kernels/small_solve.cuh"

__global__ void product(const double* A, const double* B, double* D) {
  const int l = static_cast<int>(threadIdx.x);
  const double a = A[(l / 4) * 4 + l % 4], b = B[(l % 4) * 8 + l / 4];  // A 8x4, B 4x8, row-major
  double d0 = 1.0, d1 = 1.0;                                             // D = 1 + A B
  hsma::dmma(d0, d1, a, b);
  D[(l / 4) * 8 + 2 * (l % 4)] = d0;
  D[(l / 4) * 8 + 2 * (l % 4) + 1] = d1;
}

int main() {
  double hA[32], hB[32], hD[64];
  for (int i = 0; i < 32; ++i) {
    hA[i] = std::sin(i + 1.0);
    hB[i] = std::cos(3.0 * i);
  }
  double *A, *B, *D;
  cudaMalloc(&A, sizeof hA);
  cudaMalloc(&B, sizeof hB);
  cudaMalloc(&D, sizeof hD);
  cudaMemcpy(A, hA, sizeof hA, cudaMemcpyHostToDevice);
  cudaMemcpy(B, hB, sizeof hB, cudaMemcpyHostToDevice);
  product<<<1, 32>>>(A, B, D);
  cudaMemcpy(hD, D, sizeof hD, cudaMemcpyDeviceToHost);
  double err = 0;
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) {
      double ref = 1.0;
      for (int k = 0; k < 4; ++k) ref += hA[r * 4 + k] * hB[k * 8 + c];
      err = std::fmax(err, std::fabs(ref - hD[r * 8 + c]));
    }
#ifdef HSMA_EMULATE_DMMA
  const char* path = "shuffle fallback";
#else
  const char* path = "mma.sync";
#endif
  std::printf("dmma (%s): largest error %.3e (%s)\n", path, err, cudaGetErrorString(cudaGetLastError()));
  return err < 1e-12 ? 0 : 1;
}
