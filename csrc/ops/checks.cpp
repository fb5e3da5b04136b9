// The arguments of torch.ops.hsma.trsm / trsm_ as every backend's kernel takes them (csrc/trsm.h):
// trans parsed once into Trans, the shape and type checks, the in-place checks, and the typed
// dispatcher call the autograd kernel and the Python entry make.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <torch/library.h>

#include <cctype>
#include <cstdlib>
#include <utility>

#include "planner.h"
#include "trsm.h"

namespace hsma {

Trans parse_trans(c10::string_view trans) {
  const char c = trans.size() == 1 ? static_cast<char>(std::toupper(trans[0])) : '?';
  TORCH_CHECK_VALUE(c == 'N' || c == 'T' || c == 'C',
                    "hsma::trsm: trans must be 'N', 'T' or 'C', got '", std::string(trans), "'");
  return static_cast<Trans>(c);
}

TrsmArgs make_args(bool left, bool upper, c10::string_view trans, bool unit, const c10::Scalar& alpha) {
  return TrsmArgs{left, upper, parse_trans(trans), unit, alpha};
}

at::Tensor as_float32(const at::Tensor& t) {
  // Broadcast (stride-0) dims are converted once and expanded again: an expanded identity stays a view.
  std::vector<int64_t> sizes = t.sizes().vec();
  bool broadcast = false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) == 0 && sizes[d] > 1) {
      sizes[d] = 1;
      broadcast = true;
    }
  }
  if (!broadcast) return t.to(at::kFloat);
  return t.as_strided(sizes, t.strides(), t.storage_offset()).to(at::kFloat).expand(t.sizes());
}

TrsmShape check_trsm(const at::Tensor& A, const at::Tensor& B, const TrsmArgs& args, const char* op) {
  HSMA_CHECK(A.dim() >= 2, op, ": A must have at least 2 dimensions (*, k, k), got shape ", shape(A.sizes()));
  HSMA_CHECK(B.dim() >= 2, op, ": B must have at least 2 dimensions (*, m, n), got shape ", shape(B.sizes()));
  HSMA_CHECK(A.size(-1) == A.size(-2), op, ": A must be batches of square matrices, got shape ", shape(A.sizes()));
  TORCH_CHECK_TYPE(supported_dtype(A.scalar_type()), op,
                   ": A must be float32, float64, complex64, complex128, bfloat16 or float16, got ", A.scalar_type());
  TORCH_CHECK_TYPE(trsm_dtypes_agree(A.scalar_type(), B.scalar_type()), op,
                   ": A and B must have the same dtype (or float32 A with a bfloat16 / float16 B), got A ",
                   A.scalar_type(), " and B ", B.scalar_type());
  HSMA_CHECK(A.device() == B.device(), op, ": A and B must be on the same device, got A on ", A.device().str(),
              " and B on ", B.device().str());
  HSMA_CHECK(A.layout() == at::kStrided && B.layout() == at::kStrided, op, ": A and B must be strided (dense) tensors");
  TORCH_CHECK_TYPE(!args.alpha.isComplex() || at::isComplexType(A.scalar_type()), op,
                   ": alpha is complex but A and B are ", A.scalar_type());
  TrsmShape s;
  s.k = A.size(-1);
  s.m = B.size(-2);
  s.n = B.size(-1);
  const int64_t need = args.left ? s.m : s.n;
  HSMA_CHECK(s.k == need, op, ": A is ", num(s.k), "x", num(s.k), " but B is ", num(s.m), "x", num(s.n), "; with left=",
              args.left ? "True" : "False", " A's order must equal B's number of ",
              args.left ? "rows (m)" : "columns (n)");
  const auto a_batch = A.sizes().slice(0, A.dim() - 2);
  const auto b_batch = B.sizes().slice(0, B.dim() - 2);
  try {
    s.batch = at::infer_size(a_batch, b_batch);
  } catch (const c10::Error&) {
    HSMA_CHECK(false, op, ": the batch dimensions of A ", shape(a_batch), " and B ", shape(b_batch),
               " do not broadcast");
  }
  s.result = s.batch;
  s.result.push_back(s.m);
  s.result.push_back(s.n);
  return s;
}

bool plan_hands_off(const at::Tensor& A, const at::Tensor& B, bool left, bool upper, c10::string_view trans,
                    bool unit) {
  if (!A.is_cuda() || A.dim() < 2 || B.dim() < 2 || A.size(-1) != A.size(-2) || A.size(-1) <= kSmallMaxM ||
      A.size(-1) != B.size(left ? -2 : -1) || A.device() != B.device() || A.scalar_type() != B.scalar_type() ||
      half_dtype(A.scalar_type()) || !supported_dtype(A.scalar_type()))
    return false;
  // The last answer of this thread, for a training loop's repeated calls: the same overrides object (a new one on
  // every change), device, capture state, dtype, side and operand sizes give the same plan.
  struct Memo {
    const Overrides* o = nullptr;
    int device = -1;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    bool left = true, capturing = false, hands_off = false;
    std::vector<int64_t> a_sizes, b_sizes;
  };
  thread_local Memo memo;
  const Overrides* o = &overrides();
  const bool capturing = stream_capturing(A.get_device());
  if (memo.o == o && memo.device == A.get_device() && memo.capturing == capturing && memo.dtype == A.scalar_type() &&
      memo.left == left && A.sizes() == c10::IntArrayRef(memo.a_sizes) && B.sizes() == c10::IntArrayRef(memo.b_sizes))
    return memo.hands_off;
  const std::optional<GpuIdentity> gpu = gpu_identity(A.get_device());
  if (!gpu) return false;
  TrsmShape s;
  try {
    s = check_trsm(A, B, make_args(left, upper, trans, unit, 1), "hsma::trsm");
  } catch (const c10::Error&) {  // e.g. batch dims that do not broadcast: trsm raises its own error
    return false;
  }
  const bool hands_off = plan_blocking(*gpu, blocked_shape(A, left, s), *o).path == LargePath::kAten;
  memo.o = o;
  memo.device = A.get_device();
  memo.dtype = A.scalar_type();
  memo.left = left;
  memo.capturing = capturing;
  memo.a_sizes.assign(A.sizes().begin(), A.sizes().end());
  memo.b_sizes.assign(B.sizes().begin(), B.sizes().end());
  memo.hands_off = hands_off;
  return hands_off;
}

bool torch_solve_row_major(const at::Tensor& A, const at::Tensor& B) {
  if (!A.is_conj()) return false;
  std::vector<int64_t> a_sizes = at::infer_size(A.sizes().slice(0, A.dim() - 2), B.sizes().slice(0, B.dim() - 2));
  a_sizes.push_back(A.size(-2));
  a_sizes.push_back(A.size(-1));
  return A.expand(a_sizes).mT().is_contiguous();
}

// torch.ops.hsma.trsm through the dispatcher (typed, unboxed): the autograd kernel's nested
// solves and the Python entry (csrc/ops/python_entry.cpp) call it.
at::Tensor call_trsm(const at::Tensor& A, const at::Tensor& B, bool left, bool upper, c10::string_view trans,
                     bool unit, const c10::Scalar& alpha) {
  static const auto op =
      hsma_op<at::Tensor(const at::Tensor&, const at::Tensor&, bool, bool, c10::string_view, bool, const c10::Scalar&)>(
          "hsma::trsm");
  return op.call(A, B, left, upper, trans, unit, alpha);
}

// Whether the memory spans of A and B intersect (conservative: interleaved views count).
static bool may_share_memory(const at::Tensor& A, const at::Tensor& B) {
  if (A.numel() == 0 || B.numel() == 0 || !A.storage().is_alias_of(B.storage())) return false;
  auto span = [](const at::Tensor& t) {
    int64_t extent = 1;
    for (int64_t d = 0; d < t.dim(); ++d) extent += (t.size(d) - 1) * std::abs(t.stride(d));
    const auto* lo = static_cast<const char*>(t.const_data_ptr());
    return std::make_pair(lo, lo + extent * static_cast<int64_t>(t.element_size()));
  };
  const auto a = span(A), b = span(B);
  return a.first < b.second && b.first < a.second;
}

void check_inplace(const at::Tensor& A, const at::Tensor& B, const TrsmShape& s, const char* op) {
  HSMA_CHECK(B.sizes().vec() == s.result, op, ": the in-place solve writes B, so B must have the broadcast ",
             "result's shape ", shape(s.result), ", got ", shape(B.sizes()));
  HSMA_CHECK(at::has_internal_overlap(B) != at::MemOverlap::Yes, op,
             ": B has elements that share memory (an expanded tensor?); clone it before an in-place solve");
  HSMA_CHECK(!may_share_memory(A, B), op,
             ": A and B share memory; the in-place solve would overwrite A while reading it (clone one of them)");
}

}  // namespace hsma
