// What cudaFuncAttributes::ptxVersion reports for a kernel built in several ways (no torch): the
// small kernels' dependent launches rely on it (csrc/kernels/small_solve.cuh, kernels_wait): a
// kernel's griddepcontrol.wait exists only in code compiled for a virtual architecture of 9.0 or
// newer, whatever SASS it ends up as. Build each variant here and run them on the GPU
// (P=scripts/probes/ptx_version_probe.cu):
//   nvcc -DVARIANT='"c90-sm90"' -gencode arch=compute_90,code=sm_90 -o p_c90_sm90 $P
//   nvcc -DVARIANT='"c80-sm90"' -gencode arch=compute_80,code=sm_90 -o p_c80_sm90 $P
//   nvcc -DVARIANT='"c80-ptx"' -gencode arch=compute_80,code=compute_80 -o p_c80_ptx $P
//   nvcc -DVARIANT='"c80sm80+c90sm90"' -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
//        -o p_fat $P
// (H200 result: docs/experiments.md.)
#include <cstdio>
#include <cuda_runtime.h>
__global__ void k(int* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  *p = 1;
}
int main() {
  cudaFuncAttributes a;
  cudaError_t e = cudaFuncGetAttributes(&a, k);
  printf("%s err=%d ptxVersion=%d binaryVersion=%d\n", VARIANT, int(e), a.ptxVersion, a.binaryVersion);
  return 0;
}
