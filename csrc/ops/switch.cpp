// The switch's kernels (hsma_trsm/switch.py): C++ kernels for the ATen operators behind torch's triangular,
// Cholesky and LU solves, registered for a dispatch key (CUDA for users) while the switch is on.
//
// Each kernel first checks that torch would take the arguments as given and that hsma serves them (strided,
// one device, one dtype of float32, float64, complex64, complex128, matching shapes, batch dims that
// broadcast, int32 pivots of LU's batch shape, no empty operand), and, for the triangular solves, that hsma's plan
// does not hand the call to torch's kernel (csrc/paths.h). Anything else goes to torch's own
// implementation, which returns torch's result or raises torch's error: no message is replicated here. hsma
// calls no routed operator (its ATen solves use the out= overload), and should a call reach one of these kernels
// while another runs on the same thread, it goes to torch too.
//
// torch.ops.hsma._route(ops, keys) replaces the registrations (an empty list removes them: the dispatcher
// serves torch's kernels again); torch.ops.hsma._routed_calls() counts the calls hsma served, per operator.
#include <ATen/ops/cholesky_inverse_native.h>
#include <ATen/ops/cholesky_solve_native.h>
#include <ATen/ops/linalg_solve_triangular_native.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "solvers.h"
#include "switch.h"
#include "trsm.h"

namespace hsma {
namespace {

// The routable operators, in the order of _routed_calls().
enum Op { kSolveTriangular, kTriangularSolve, kCholeskySolve, kCholeskyInverse, kLuSolve, kOps };
static_assert(kRoutedOps.size() == kOps, "kRoutedOps (switch.h) lists the operators of Op, in its order");
constexpr const auto& kOpNames = kRoutedOps;
std::array<std::atomic<int64_t>, kOps> served{};

thread_local bool inside = false;  // a switch kernel runs on this thread

// While alive: inside; on a return (not an exception), the call is counted for `op`.
class Serving {
 public:
  explicit Serving(Op op) : op_(op), exceptions_(std::uncaught_exceptions()) { inside = true; }
  ~Serving() {
    inside = false;
    if (std::uncaught_exceptions() == exceptions_) served[op_].fetch_add(1, std::memory_order_relaxed);
  }
  Serving(const Serving&) = delete;
  Serving& operator=(const Serving&) = delete;

 private:
  Op op_;
  int exceptions_;
};

// Arguments torch takes and hsma serves, none empty (torch's empty results have strides of their own), in a
// call that is not nested in another of these kernels.
bool takes(const at::Tensor& A, const at::Tensor& B, int64_t b_dim) {
  return !inside && operands_fit(A, B, b_dim) && A.numel() > 0 && B.numel() > 0;
}

at::Tensor solve_triangular(const at::Tensor& A, const at::Tensor& B, bool upper, bool left, bool unit) {
  if (!takes(A, B, left ? -2 : -1) || plan_hands_off(A, B, left, upper, "N", unit))
    return at::native::linalg_solve_triangular(A, B, upper, left, unit);
  const Serving s(kSolveTriangular);
  if (torch_solve_row_major(A, B)) return call_trsm(A, B, left, upper, "N", unit, 1);  // torch's layout
  // left: X^T A^T = B^T; right: A^T X^T = B^T
  return call_trsm(A, B.mT(), !left, upper, "T", unit, 1).mT();
}

std::tuple<at::Tensor, at::Tensor> triangular_solve(const at::Tensor& b, const at::Tensor& A, bool upper,
                                                    bool transpose, bool unit) {
  if (!takes(A, b, -2) || plan_hands_off(A, b, true, upper, transpose ? "T" : "N", unit)) {
    at::Tensor X = at::empty({0}, b.options()), M = at::empty({0}, b.options());
    at::triangular_solve_out(X, M, b, A, upper, transpose, unit);
    return {X, M};
  }
  const Serving s(kTriangularSolve);
  // op(A) X = b as X^T op(A)^T = b^T; op(A)^T is A^T, or A itself when transpose
  at::Tensor X = call_trsm(A, b.mT(), false, upper, transpose ? "N" : "T", unit, 1).mT();
  std::vector<int64_t> m_sizes = X.sizes().vec();
  m_sizes.back() = A.size(-1);
  at::Tensor M = at::empty(m_sizes, A.options()).mT();  // torch's copy of A: broadcast, column-major
  M.copy_(A);
  return {X, M};
}

at::Tensor cholesky_solve_k(const at::Tensor& B, const at::Tensor& L, bool upper) {
  if (!takes(L, B, -2)) return at::native::cholesky_solve(B, L, upper);
  const Serving s(kCholeskySolve);
  return hsma::cholesky_solve(B, L, upper);
}

at::Tensor cholesky_inverse_k(const at::Tensor& L, bool upper) {
  if (!takes(L, L, -2)) return at::native::cholesky_inverse(L, upper);
  const Serving s(kCholeskyInverse);
  return hsma::cholesky_inverse(L, upper);
}

at::Tensor lu_solve_k(const at::Tensor& LU, const at::Tensor& pivots, const at::Tensor& B, bool left, bool adjoint) {
  if (!pivots_fit(LU, pivots) || !takes(LU, B, left ? -2 : -1)) {
    at::Tensor X = at::empty({0}, LU.options());
    return at::linalg_lu_solve_out(X, LU, pivots, B, left, adjoint);
  }
  const Serving s(kLuSolve);
  return hsma::lu_solve(LU, pivots, B, left, adjoint);
}

// The registrations while routed (the library's destructor removes them), and their guard.
std::mutex routing_mutex;
std::unique_ptr<torch::Library> routing;

void register_op(torch::Library& lib, const std::string& op, c10::DispatchKey key) {
  if (op == kOpNames[kSolveTriangular]) {
    lib.impl(op.c_str(), torch::dispatch(key, TORCH_FN(solve_triangular)));
  } else if (op == kOpNames[kTriangularSolve]) {
    lib.impl(op.c_str(), torch::dispatch(key, TORCH_FN(triangular_solve)));
  } else if (op == kOpNames[kCholeskySolve]) {
    lib.impl(op.c_str(), torch::dispatch(key, TORCH_FN(cholesky_solve_k)));
  } else if (op == kOpNames[kCholeskyInverse]) {
    lib.impl(op.c_str(), torch::dispatch(key, TORCH_FN(cholesky_inverse_k)));
  } else if (op == kOpNames[kLuSolve]) {
    lib.impl(op.c_str(), torch::dispatch(key, TORCH_FN(lu_solve_k)));
  } else {
    std::string known;
    for (const char* name : kOpNames) known += std::string(known.empty() ? "" : ", ") + name;
    TORCH_CHECK_VALUE(false, "hsma_trsm.enable: unknown operator '", op, "' (routable: ", known, ")");
  }
}

// Passes warnings on to `next`, except the dispatcher's about overriding a kernel: intended here (torch has one
// for the key).
class Quiet : public c10::WarningHandler {
 public:
  explicit Quiet(c10::WarningHandler* next) : next_(next) {}
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("Overriding a previously registered kernel") == std::string::npos) next_->process(warning);
  }

 private:
  c10::WarningHandler* next_;
};

void route(std::vector<std::string> ops, std::vector<std::string> keys) {
  std::vector<c10::DispatchKey> parsed;
  for (const auto& key : keys) {
    c10::DispatchKey k = c10::DispatchKey::Undefined;
    try {
      k = c10::parseDispatchKey(key);
    } catch (const c10::Error&) {  // not a dispatch key at all: the same ValueError below
    }
    TORCH_CHECK_VALUE(k == c10::DispatchKey::CUDA || k == c10::DispatchKey::CPU,
                      "hsma_trsm.enable: unknown dispatch key '", key, "' (CUDA, or CPU for tests)");
    parsed.push_back(k);
  }
  // The new registrations are made in full before the old ones go (the dispatcher serves the newest of a key's
  // kernels, and the one before it again when that is removed): a failure leaves the old ones in place.
  std::unique_ptr<torch::Library> lib;
  const std::lock_guard<std::mutex> lock(routing_mutex);
  if (!ops.empty() && !parsed.empty()) {
    lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", std::nullopt, __FILE__, __LINE__);
    Quiet quiet(c10::WarningUtils::get_warning_handler());
    const c10::WarningUtils::WarningHandlerGuard guard(&quiet);
    for (const auto& op : ops)
      for (const auto key : parsed) register_op(*lib, op, key);
  }
  routing = std::move(lib);
}

std::vector<int64_t> routed_calls() {
  std::vector<int64_t> counts;
  for (const auto& c : served) counts.push_back(c.load(std::memory_order_relaxed));
  return counts;
}

}  // namespace
}  // namespace hsma

TORCH_LIBRARY_FRAGMENT(hsma, m) {
  m.def("_route(str[] ops, str[] keys) -> ()", &hsma::route);
  m.def("_routed_calls() -> int[]", &hsma::routed_calls);
}
