// Portability layer for the hsma_trsm kernels: one source for CUDA (nvcc) and HIP (hipcc).
//
// Kernels include this header and nothing from torch, so every kernel file compiles alone for
// either vendor. What differs between NVIDIA and AMD lives here:
//   - the warp / wavefront width (32 on NVIDIA, 64 on gfx9 AMD) as a compile-time constant;
//   - lane shuffles behind one wrapper (CUDA needs a lane mask, HIP does not take one);
//   - the shared-memory budget a block may count on without opting in (48 KB on NVIDIA,
//     64 KB on AMD: the paper's setting and exactly one complex128 64x64 tile);
//   - a small complex type with the same layout as c10::complex / std::complex;
//   - the runtime calls a launcher needs to opt a kernel into more dynamic shared memory
//     (hsmaFuncSetAttribute) and to size its grid (hsmaOccupancyMaxActiveBlocksPerMultiprocessor);
//   - asynchronous global -> shared copies (cp.async on sm_80+, a load and a store elsewhere);
//   - kernel launches that may overlap the previous kernel's end (programmatic dependent launch,
//     CUDA sm_90+; a plain launch elsewhere).
#pragma once

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#define HSMA_HIP 1
typedef hipStream_t hsmaStream_t;
typedef hipError_t hsmaError_t;
#define hsmaSuccess hipSuccess
#define hsmaGetLastError hipGetLastError
#define hsmaGetErrorString hipGetErrorString
#define hsmaGetDevice hipGetDevice
#define hsmaFuncSetAttribute hipFuncSetAttribute
#define hsmaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define hsmaOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#else
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define HSMA_HIP 0
typedef cudaStream_t hsmaStream_t;
typedef cudaError_t hsmaError_t;
#define hsmaSuccess cudaSuccess
#define hsmaGetLastError cudaGetLastError
#define hsmaGetErrorString cudaGetErrorString
#define hsmaGetDevice cudaGetDevice
#define hsmaFuncSetAttribute cudaFuncSetAttribute
#define hsmaFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define hsmaOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#endif

#include <atomic>
#include <mutex>
#include <cstdint>

// A kernel's register cap per thread, whatever its block size (__maxnreg__, CUDA 12.4+; a kernel
// takes it instead of __launch_bounds__, not with it). Without it (AMD: hipcc has no such
// attribute; older CUDA) the kernel is left to the compiler's choice.
#if !HSMA_HIP && defined(__CUDACC_VER_MAJOR__) && \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4))
#define HSMA_MAXNREG(...) __maxnreg__((__VA_ARGS__))
#else
#define HSMA_MAXNREG(...)
#endif

namespace hsma {

// Device-side warp width. __AMDGCN_WAVEFRONT_SIZE is defined by clang for every AMD target
// (64 on gfx9 / CDNA, 32 on RDNA in wave32 mode); NVIDIA warps are 32 lanes.
#if HSMA_HIP && defined(__AMDGCN_WAVEFRONT_SIZE)
constexpr int kWarpSize = __AMDGCN_WAVEFRONT_SIZE;
#elif HSMA_HIP
constexpr int kWarpSize = 64;
#else
constexpr int kWarpSize = 32;
#endif

// Shared memory a block may use without an opt-in attribute (static allocations).
#if HSMA_HIP
constexpr int kSharedBudgetBytes = 64 * 1024;
#else
constexpr int kSharedBudgetBytes = 48 * 1024;
#endif

// ---------------------------------------------------------------------------------------------
// complex<R>: layout-compatible with c10::complex<R> (real, imag), device arithmetic only.
template <typename R>
struct alignas(2 * sizeof(R)) complex {
  R re, im;
  complex() = default;  // trivial, so arrays of it can live in __shared__ memory (clang/HIP)
  __host__ __device__ constexpr complex(R r, R i = R(0)) : re(r), im(i) {}
};

template <typename T> struct real_of { using type = T; };
template <typename R> struct real_of<complex<R>> { using type = R; };

template <typename R> __host__ __device__ inline complex<R> operator+(complex<R> a, complex<R> b) { return {a.re + b.re, a.im + b.im}; }
template <typename R> __host__ __device__ inline complex<R> operator-(complex<R> a, complex<R> b) { return {a.re - b.re, a.im - b.im}; }
template <typename R> __host__ __device__ inline complex<R> operator*(complex<R> a, complex<R> b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
template <typename R> __host__ __device__ inline complex<R>& operator+=(complex<R>& a, complex<R> b) { a = a + b; return a; }
template <typename R> __host__ __device__ inline complex<R>& operator-=(complex<R>& a, complex<R> b) { a = a - b; return a; }

// Division a / b without forming 1/b: Smith's algorithm, so a huge or subnormal b neither
// overflows nor flushes an intermediate reciprocal. b = 0 gives inf/nan as IEEE division does.
template <typename R> __host__ __device__ inline complex<R> operator/(complex<R> a, complex<R> b) {
  if (b.im == R(0)) return {a.re / b.re, a.im / b.re};
  if (b.re == R(0)) return {a.im / b.im, -a.re / b.im};
  R ar = b.re < 0 ? -b.re : b.re, ai = b.im < 0 ? -b.im : b.im;
  if (ar >= ai) {
    R t = b.im / b.re, d = b.re + b.im * t;
    return {(a.re + a.im * t) / d, (a.im - a.re * t) / d};
  }
  R t = b.re / b.im, d = b.re * t + b.im;
  return {(a.re * t + a.im) / d, (a.im * t - a.re) / d};
}

__host__ __device__ inline float conj_if(float v, bool) { return v; }
__host__ __device__ inline double conj_if(double v, bool) { return v; }
template <typename R> __host__ __device__ inline complex<R> conj_if(complex<R> v, bool c) {
  return c ? complex<R>{v.re, -v.im} : v;
}

// Reciprocal of a pivot for the substitutions, or 0 when multiplying by it could differ from
// dividing by more than rounding (a zero, inf, nan, subnormal or near-overflow pivot): callers
// multiply by r when r != 0 (a multiply on the critical path instead of a division) and divide
// by the pivot otherwise, so IEEE results (inf/nan from a zero pivot) and accuracy at the edges
// of the exponent range are those of division.
__host__ __device__ inline bool usable_reciprocal(float r) {
  const float a = r < 0 ? -r : r;
  return a >= 1.17549435e-38f && a <= 1.7014117e38f;  // [FLT_MIN, FLT_MAX / 2]
}
__host__ __device__ inline bool usable_reciprocal(double r) {
  const double a = r < 0 ? -r : r;
  return a >= 2.2250738585072014e-308 && a <= 8.98846567431158e307;  // [DBL_MIN, DBL_MAX / 2]
}
template <typename R> __host__ __device__ inline bool usable_reciprocal(complex<R> r) {
  const R a = r.re < 0 ? -r.re : r.re, b = r.im < 0 ? -r.im : r.im;
  const R big = a > b ? a : b, small = a > b ? b : a;
  return usable_reciprocal(big) && !(small != small) && small <= big;
}
template <typename T> __host__ __device__ inline T pivot_reciprocal(T d) {
  const T r = T(1) / d;
  return usable_reciprocal(r) ? r : T(0);
}
__host__ __device__ inline bool is_zero(float v) { return v == 0.0f; }
__host__ __device__ inline bool is_zero(double v) { return v == 0.0; }
template <typename R> __host__ __device__ inline bool is_zero(complex<R> v) { return v.re == R(0) && v.im == R(0); }
// x / d, given r = pivot_reciprocal(d).
template <typename T> __host__ __device__ inline T divide_by_pivot(T x, T d, T r) {
  if (is_zero(r)) return x / d;  // a branch (uniform in most kernels, per lane in the tile kernel),
  return x * r;                  // so the division is not evaluated alongside the product and selected
}

// An inverse's entry that cannot stand in for a division: inf, nan or subnormal (a pivot whose
// reciprocal overflows or underflows).
__host__ __device__ inline bool inaccurate(float v) {
  const float a = v < 0 ? -v : v;
  return !(a <= 3.40282347e38f) || (a != 0.0f && a < 1.17549435e-38f);
}
__host__ __device__ inline bool inaccurate(double v) {
  const double a = v < 0 ? -v : v;
  return !(a <= 1.7976931348623157e308) || (a != 0.0 && a < 2.2250738585072014e-308);
}
template <typename R> __host__ __device__ inline bool inaccurate(complex<R> v) {
  return inaccurate(v.re) || inaccurate(v.im);
}

// ---------------------------------------------------------------------------------------------
// 16-bit storage types (layout-compatible with c10::BFloat16 and c10::Half): kernels read and
// write them and compute in float. to_compute<C>(v) widens a stored value; from_compute<S>(c)
// rounds to nearest even (nan stays nan; overflow gives inf, as torch's conversions do).
struct bfloat16_bits { unsigned short bits; };
struct float16_bits { unsigned short bits; };

// The element types the kernels compute in (the host side only names them).
template <typename S> struct compute_of { using type = S; };
template <> struct compute_of<bfloat16_bits> { using type = float; };
template <> struct compute_of<float16_bits> { using type = float; };

#if defined(__CUDACC__) || defined(__HIPCC__)
template <typename C, typename S> __device__ inline C to_compute(S v) { return C(v); }
template <> __device__ inline float to_compute<float, bfloat16_bits>(bfloat16_bits v) {
  return __uint_as_float(static_cast<unsigned>(v.bits) << 16);
}
template <> __device__ inline float to_compute<float, float16_bits>(float16_bits v) {
  return __half2float(__ushort_as_half(v.bits));
}
template <typename S, typename C> __device__ inline S from_compute(C v) { return S(v); }
template <> __device__ inline bfloat16_bits from_compute<bfloat16_bits, float>(float v) {
  const unsigned u = __float_as_uint(v);
  if (v != v) return {static_cast<unsigned short>(0x7fc0)};  // torch's nan
  return {static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
template <> __device__ inline float16_bits from_compute<float16_bits, float>(float v) {
  return {__half_as_ushort(__float2half_rn(v))};
}
#endif

// 16 bytes of stored elements: one vector load.
template <typename S> struct alignas(16) Vec16 {
  static constexpr int kLen = 16 / int(sizeof(S));
  S v[kLen];
};

// x - a*b as one fused step where the hardware has it.
__device__ inline float fms(float x, float a, float b) { return fmaf(-a, b, x); }
__device__ inline double fms(double x, double a, double b) { return fma(-a, b, x); }
template <typename R> __device__ inline complex<R> fms(complex<R> x, complex<R> a, complex<R> b) {
  return {fms(fms(x.re, a.re, b.re), -a.im, b.im), fms(fms(x.im, a.re, b.im), a.im, b.re)};
}

// ---------------------------------------------------------------------------------------------
// Host-side facts about a device, queried once per device (the library's one per-device cache): the
// launchers size their grids and lane segments from these (the device warp width is only a
// compile-time constant in the device pass, so the host asks the runtime), and the planner reads
// the device's identity and shared memory from them (csrc/cuda/trsm_cuda.cpp).
struct DeviceInfo {
  int device = 0;  // the runtime's device index
  int multiprocessors = 0;
  int warp_size = 0;
  int cc_major = 0;  // compute capability (major) on CUDA; 0 on AMD
  int shared_optin = 0;  // the most dynamic shared memory a block can opt in to, bytes
  char name[256] = {};   // as the driver reports it: "NVIDIA H200"
  int prop_major = 0, prop_minor = 0;  // the device properties' major.minor (CUDA and AMD alike)
};

// Thread-safe: the first call for a device queries it under a lock; an entry is published (release / acquire)
// only once its properties query succeeded, so a failed query is retried by the next call.
inline const DeviceInfo& device_info(int dev) {
  static DeviceInfo cache[64];
  static std::atomic<bool> filled[64];
  static std::mutex fill_lock;
  const int i = dev & 63;
  if (filled[i].load(std::memory_order_acquire)) return cache[i];
  const std::lock_guard<std::mutex> guard(fill_lock);
  DeviceInfo& info = cache[i];
  if (filled[i].load(std::memory_order_relaxed)) return info;
  DeviceInfo q;
  q.device = dev;
#if HSMA_HIP
  hipDeviceProp_t prop;
  const bool ok = hipGetDeviceProperties(&prop, dev) == hipSuccess;
#else
  cudaDeviceProp prop;
  const bool ok = cudaGetDeviceProperties(&prop, dev) == cudaSuccess;
#endif
  if (ok) {
    for (int c = 0; c < 255 && prop.name[c] != '\0'; ++c) q.name[c] = prop.name[c];
    q.prop_major = prop.major;
    q.prop_minor = prop.minor;
  }
#if HSMA_HIP
  (void)hipDeviceGetAttribute(&q.multiprocessors, hipDeviceAttributeMultiprocessorCount, dev);
  (void)hipDeviceGetAttribute(&q.shared_optin, hipDeviceAttributeMaxSharedMemoryPerBlock, dev);
  (void)hipDeviceGetAttribute(&q.warp_size, hipDeviceAttributeWarpSize, dev);
#else
  (void)cudaDeviceGetAttribute(&q.shared_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  (void)cudaDeviceGetAttribute(&q.multiprocessors, cudaDevAttrMultiProcessorCount, dev);
  (void)cudaDeviceGetAttribute(&q.cc_major, cudaDevAttrComputeCapabilityMajor, dev);
  (void)cudaDeviceGetAttribute(&q.warp_size, cudaDevAttrWarpSize, dev);
#endif
  if (q.multiprocessors <= 0) q.multiprocessors = 80;
  if (q.shared_optin <= 0) q.shared_optin = kSharedBudgetBytes;
  if (q.warp_size <= 0) q.warp_size = 32;
  info = q;
  if (ok) filled[i].store(true, std::memory_order_release);
  return info;
}

inline const DeviceInfo& current_device_info() {
  int dev = 0;
#if HSMA_HIP
  (void)hipGetDevice(&dev);
#else
  (void)cudaGetDevice(&dev);
#endif
  return device_info(dev);
}

// Opts kernel `fn` in to `smem` bytes of dynamic shared memory (above NVIDIA's 48 KB default) and
// returns in *per_sm how many of its blocks of `threads` fit on a multiprocessor (at least 1),
// once per device: `cache` is the caller's static, 0 where not configured yet.
inline hsmaError_t resident_blocks(const void* fn, int threads, size_t smem, std::atomic<int> (&cache)[64],
                                   int* per_sm) {
  int dev = 0;
  hsmaError_t err = hsmaGetDevice(&dev);
  if (err != hsmaSuccess) return err;
  *per_sm = cache[dev & 63].load(std::memory_order_relaxed);
  if (*per_sm > 0) return hsmaSuccess;
  if (smem > 48 * 1024) {
    err = hsmaFuncSetAttribute(fn, hsmaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != hsmaSuccess) {
#if HSMA_HIP
      (void)hsmaGetLastError();  // an AMD block has 64 KB of LDS without opting in
#else
      return err;
#endif
    }
  }
  if (hsmaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, fn, threads, smem) != hsmaSuccess || *per_sm < 1) {
    (void)hsmaGetLastError();  // not left for the launch check: it only sizes the grid
    *per_sm = 1;
  }
  cache[dev & 63].store(*per_sm, std::memory_order_relaxed);
  return hsmaSuccess;
}

#if defined(__CUDACC__) || defined(__HIPCC__)  // device-only helpers below
// ---------------------------------------------------------------------------------------------
// Lane shuffle within segments of `width` lanes (a power of two <= kWarpSize): every lane reads
// the value held by lane `src` of its own segment. All lanes of the warp must take part.
__device__ inline float shfl(float v, int src, int width) {
#if HSMA_HIP
  return __shfl(v, src, width);
#else
  return __shfl_sync(0xffffffffu, v, src, width);
#endif
}
__device__ inline double shfl(double v, int src, int width) {
#if HSMA_HIP
  return __shfl(v, src, width);
#else
  return __shfl_sync(0xffffffffu, v, src, width);
#endif
}
template <typename R> __device__ inline complex<R> shfl(complex<R> v, int src, int width) {
  return {shfl(v.re, src, width), shfl(v.im, src, width)};
}

// Copy of one element from global to shared memory that does not wait for the load: cp.async
// on NVIDIA sm_80 and newer (no register holds the value; every copy a thread issues is in flight
// at once), elsewhere a plain load and store. The copies a thread issued have landed, for that
// thread, after copy_async_wait_all(); for the block, after a barrier that follows it.
#if !HSMA_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define HSMA_ASYNC_COPY 1
#else
#define HSMA_ASYNC_COPY 0
#endif
template <typename T> __device__ inline void copy_async(T* dst_shared, const T* src_global) {
#if HSMA_ASYNC_COPY
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "copy_async: 4, 8 or 16 bytes");
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(dst_shared));
  if constexpr (sizeof(T) == 16)  // .cg (L2 only) takes only 16-byte copies
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src_global) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(src_global), "n"(int(sizeof(T)))
                 : "memory");
#else
  *dst_shared = *src_global;
#endif
}
#if HSMA_ASYNC_COPY
// Predicated copy_async: nothing when !pred; with pred, the element at src when `valid`, else
// zero, written without reading src (cp.async's source size 0). No branch: a copy in unrolled
// code whose predicates are known early is issued without waiting for them to be resolved.
template <typename T> __device__ inline void copy_async_or_zero(T* dst_shared, const T* src_global, bool pred,
                                                                bool valid) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "copy_async_or_zero: 4, 8 or 16 bytes");
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(dst_shared));
  const int src_bytes = valid ? int(sizeof(T)) : 0;
  if constexpr (sizeof(T) == 16)
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.cg.shared.global [%0], [%1], 16, %3;\n}\n"
                 ::"r"(dst), "l"(src_global), "r"(int(pred)), "r"(src_bytes) : "memory");
  else
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.ca.shared.global [%0], [%1], %3, %4;\n}\n"
                 ::"r"(dst), "l"(src_global), "r"(int(pred)), "n"(int(sizeof(T))), "r"(src_bytes) : "memory");
}
#endif
// The same for 16 bytes (both addresses 16-byte aligned).
__device__ inline void copy_async_16(void* dst_shared, const void* src_global) {
#if HSMA_ASYNC_COPY
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(dst_shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src_global) : "memory");
#else
  *static_cast<uint4*>(dst_shared) = *static_cast<const uint4*>(src_global);
#endif
}
__device__ inline void copy_async_wait_all() {
#if HSMA_ASYNC_COPY
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// Reads back a value this thread stored earlier to global memory (a volatile load: ordered after
// the store, never replaced by the stored value kept in a register, which is the point: the
// value's register was freed).
__device__ inline float reload(const float* p) { return *static_cast<const volatile float*>(p); }
__device__ inline double reload(const double* p) { return *static_cast<const volatile double*>(p); }
template <typename R> __device__ inline complex<R> reload(const complex<R>* p) {
  const volatile R* v = reinterpret_cast<const volatile R*>(p);
  return {v[0], v[1]};
}

// Lane index within the warp / wavefront.
__device__ inline int lane_id() { return static_cast<int>(threadIdx.x) & (kWarpSize - 1); }

// Barrier and shared-memory fence for the lanes of one warp (on AMD, of one wavefront, which
// runs in lockstep: only the memory ordering needs a fence).
__device__ inline void warp_sync() {
#if HSMA_HIP
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup");
  __builtin_amdgcn_wave_barrier();
#else
  __syncwarp();
#endif
}

// ---------------------------------------------------------------------------------------------
// Programmatic dependent launch (CUDA, sm_90 and newer; CUDA Programming Guide, "Programmatic
// Dependent Launch and Synchronization"). A kernel launched with launch_kernel(..., dependent =
// true) may be scheduled while the previous kernel in its stream still runs, if that kernel
// allows it (griddepcontrol.launch_dependents); its blocks then start, and stop at
// grid_dependency_sync() until the previous kernel has completed and its memory is visible. So
// the launch of a solve overlaps the end of the kernel before it (one solve after another in a
// CUDA graph: the GPU time between two kernels), never its data. Every kernel launched that way
// calls grid_dependency_sync() before it touches global memory; with `release` the call also lets
// the next such kernel launch (else it launches when this one completes). Elsewhere (older GPUs,
// AMD, a launch without the attribute) both are no-ops.
__device__ inline void grid_dependency_sync(bool release) {
#if !HSMA_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if (release) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), with the programmatic-serialisation attribute
// when `dependent` (CUDA 12.3+, whose stream capture records it as a programmatic edge of the
// graph; the launchers ask for it on sm_90+ where the kernels' code waits, unless
// override pdl=0; the kernel must call grid_dependency_sync() first). Returns the launch error,
// which is not left behind as the runtime's last error.
template <typename... Params, typename... Args>
hsmaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, hsmaStream_t stream,
                          bool dependent, Args... args) {
#if !HSMA_HIP && CUDART_VERSION >= 12030
  if (dependent) {
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = attribute;
    config.numAttrs = 1;
    const cudaError_t err = cudaLaunchKernelEx(&config, kernel, args...);
    if (err != cudaSuccess) (void)cudaGetLastError();
    return err;
  }
#else
  (void)dependent;
#endif
  kernel<<<grid, block, smem, stream>>>(args...);
  return hsmaGetLastError();
}
#endif  // __CUDACC__ || __HIPCC__

}  // namespace hsma
