// CUDA (and, hipified, ROCm) backend of torch.ops.hsma.trsm: checks the arguments (csrc/trsm.h), reads the
// overrides once, asks the planner (csrc/planner.h) for the plan, and runs it with the path's executor (exec.h):
// small (k <= 64), sweep, blocked, or the hand-off to ATen's solve. In every executor, each (side, uplo, trans,
// diag, strides, conj view) becomes the kernels' canonical lower-triangular left solve (canonical.h).
// bfloat16 and float16 are solved in float32 arithmetic: up to order 64 by the small kernels, which read and write
// them as stored; above it inputs converted, the result rounded once.
// Everything runs on torch's current stream; nothing synchronises with the host.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "cuda/canonical.h"
#include "cuda/exec.h"
#include "planner.h"
#include "trsm.h"

namespace hsma {
namespace {

// Name, compute capability and shared memory of device `dev`, from the per-device cache of the kernels'
// portability layer (kernels/portable.cuh).
GpuIdentity identity_of(int dev) {
  const DeviceInfo& info = device_info(dev);
  HSMA_CHECK(info.name[0] != '\0', "hsma::trsm: device query failed for device ", num(dev));
  return GpuIdentity{info.name, std::to_string(info.prop_major) + "." + std::to_string(info.prop_minor),
                     info.shared_optin};
}

// Whether device dev's current stream is capturing a CUDA graph (then the path table's GPU-only choice, paths.h).
// The default (legacy) stream never captures and is not asked: the runtime refuses that query while another stream
// captures in global mode. A query it refuses otherwise counts as no capture, its error cleared.
bool capturing_on(int dev) {
  const auto index = static_cast<c10::DeviceIndex>(dev);
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(index);
  if (stream == c10::cuda::getDefaultCUDAStream(index)) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream.stream(), &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

// The host-side plan (blocked_shape, plan_hands_off in csrc/ops/checks.cpp) asks for devices' identities and
// capture states here.
[[maybe_unused]] const bool sources_set =
    (set_gpu_identity_source(&identity_of), set_capture_source(&capturing_on), true);

// The plan of the solve of (A, B) on the current device under the overrides o.
Plan plan_call(const at::Tensor& A, const TrsmArgs& args, const TrsmShape& s, const Overrides& o,
               bool explain = false) {
  if (s.k <= kSmallMaxM) return plan_small(o);
  int dev = 0;
  check_launch(cudaGetDevice(&dev), "device query");
  return plan_large(identity_of(dev), blocked_shape(A, args.left, s), o, explain);
}

// Solves into X (fresh and contiguous, or B itself for the in-place form; the hand-off: into X, fresh).
void solve_into(const at::Tensor& A_in, const at::Tensor& B_in, at::Tensor& X, const TrsmArgs& args,
                const TrsmShape& s) {
  if (X.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(A_in.device());
  const Plan plan = plan_call(A_in, args, s, overrides());
  // Negative views are resolved (rare); A's conj view is folded into the kernels' conj flag.
  const at::Tensor A = A_in.resolve_neg();
  const at::Tensor B = B_in.resolve_conj().resolve_neg();
  if (plan.path == SolvePath::kAten) {  // torch's own kernel
    aten_solve_into(A, B, args, X);
    return;
  }
  if (half_dtype(B.scalar_type())) {  // (orders up to 64: see native_half)
    exec_small<float>(A, B, X, args, s, plan.small);
    return;
  }
  AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES(A.scalar_type(), "hsma::trsm", [&] {
    switch (plan.path) {
      case SolvePath::kSmall: exec_small<scalar_t>(A, B, X, args, s, plan.small); break;
      case SolvePath::kSweep: exec_sweep<scalar_t>(A, B, X, args, s, plan.large.sweep, plan.small.max_blocks); break;
      default: exec_blocked<scalar_t>(A, B, X, args, s, plan); break;
    }
  });
}

at::Tensor solve_new(const at::Tensor& A, const at::Tensor& B, const TrsmArgs& args, const TrsmShape& s) {
  at::Tensor X = at::empty(s.result, B.options());
  solve_into(A, B, X, args, s);
  return X;
}

// Whether a solve of a bfloat16 / float16 B (A of its dtype or float32) runs as stored (the small kernels, orders up
// to 64); above, the float32 solve of the converted inputs, rounded once to B's dtype.
bool native_half(const TrsmShape& s) { return s.k <= kSmallMaxM; }

at::Tensor trsm_cuda(const at::Tensor& A, const at::Tensor& B, bool left, bool upper, c10::string_view trans,
                     bool unitriangular, const c10::Scalar& alpha) {
  const TrsmArgs args = make_args(left, upper, trans, unitriangular, alpha);
  const TrsmShape s = check_trsm(A, B, args, "hsma::trsm");
  if (half_dtype(B.scalar_type()) && !native_half(s))
    return solve_new(as_float32(A), as_float32(B), args, s).to(B.scalar_type());
  return solve_new(A, B, args, s);
}

void trsm_cuda_(const at::Tensor& A, at::Tensor& B, bool left, bool upper, c10::string_view trans,
                bool unitriangular, const c10::Scalar& alpha) {
  const TrsmArgs args = make_args(left, upper, trans, unitriangular, alpha);
  const TrsmShape s = check_trsm(A, B, args, "hsma::trsm_");
  check_inplace(A, B, s, "hsma::trsm_");
  if (half_dtype(B.scalar_type()) && !native_half(s)) {
    B.copy_(solve_new(as_float32(A), as_float32(B), args, s));
  } else if (s.k <= kSmallMaxM && !B.is_conj() && !B.is_neg()) {
    solve_into(A, B, B, args, s);  // the small kernel reads each element before writing it
  } else {
    B.copy_(solve_new(A, B, args, s));
  }
}

// The path of a trsm call (torch.ops.hsma._plan): small, empty, or the large-order plan with its parameters.
std::tuple<std::string, std::string> plan_cuda(const at::Tensor& A, const at::Tensor& B, bool left, bool upper,
                                               c10::string_view trans, bool unitriangular, bool explain) {
  const TrsmArgs args = make_args(left, upper, trans, unitriangular, 1);
  const TrsmShape s = check_trsm(A, B, args, "hsma::_plan");
  int64_t numel = 1;
  for (auto v : s.result) numel *= v;
  if (numel == 0) return {"empty", explain ? "an empty result: nothing to solve" : ""};
  if (s.k <= kSmallMaxM)
    return {"small", explain ? "order k <= 64: one launch of the shared-memory kernels for the whole batch" : ""};
  const c10::cuda::CUDAGuard guard(A.device());
  const BlockPlan p = plan_call(A, args, s, overrides(), explain).large;
  if (!explain) return {path_name(p.path), ""};
  std::string what;
  if (p.path == LargePath::kSweep)
    what = "sweep (row block " + std::to_string(p.sweep.rows) + ", panel " + std::to_string(p.sweep.cols) +
           " columns, tasks of " + std::to_string(p.sweep.segment) + " row blocks); ";
  else if (p.path == LargePath::kBlocked)
    what = std::string("blocked (NB ") + std::to_string(p.nb) + ", " + variant_name(p.variant) + ", IB " +
           std::to_string(p.ib) + "); ";
  return {path_name(p.path), what + p.source};
}

}  // namespace
}  // namespace hsma

TORCH_LIBRARY_IMPL(hsma, CUDA, m) {
  m.impl("trsm", &hsma::trsm_cuda);
  m.impl("trsm_", &hsma::trsm_cuda_);
  m.impl("_plan", &hsma::plan_cuda);
}
