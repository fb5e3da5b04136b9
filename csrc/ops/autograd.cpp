// Autograd of torch.ops.hsma.trsm, in C++ so that a call with no gradient wanted costs no
// Python (the Autograd kernel is on every call's path).
//
// Three paths, chosen per call:
//   - no gradient of either kind wanted: the op below autograd, no node, nothing saved;
//   - reverse mode only, outside functorch transforms: a torch::autograd::Function (its node
//     supports compiled autograd, torch._dynamo's compiled backward);
//   - forward-mode tangents, or inside torch.func transforms: a hand-made autograd Node, the way
//     PyTorch's generated VariableType kernels are written (SavedVariables, the tangent set with
//     _set_fw_grad). A C++ custom Function has no forward mode and refuses every functorch
//     transform ("cannot use C++ torch::autograd::Function with functorch transforms").
// Both nodes run the same backward formula.
//
// With T = op(A) and X the forward result:
//   left:  T X = alpha B  ->  G = T^{-H} gX,  gB = conj(alpha) G,  gT = -G X^H
//   right: X T = alpha B  ->  G = gX T^{-H},  gB = conj(alpha) G,  gT = -X^H G
// gA is gT mapped back through op (T = A^T: gA = gT^T; T = A^H: gA = gT^H), projected on the
// triangle that was read (strictly, with a unit diagonal) and summed over broadcast batch dims.
// Forward mode (tangents dA, dB):
//   left:  dX = T^{-1} (alpha dB - dT X),  right: dX = (alpha dB - X dT) T^{-1},
// dT = op(dA) projected on the same triangle, so the unit diagonal's tangent is ignored.
// A float32 A beside a 16-bit B (and X): where gA is wanted, G is solved from gX widened to float32, and gT and
// the tangent's dT X are formed in float32, so that gA and dX are rounded once at most (gB once, to B's dtype).
// Every solve goes through the dispatcher, so double backward, forward-over-reverse and
// reverse-over-forward work, and vmap sees the batch rule.
#include <ATen/ExpandUtils.h>
#include <c10/core/SymInt.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <ATen/FuncTorchTLS.h>

#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "trsm.h"

namespace hsma {
namespace {

using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

// The owning pointer type of autograd nodes: std::shared_ptr<Node> in older torch releases,
// c10::intrusive_ptr<Node> in newer ones. The code below works with either.
using NodePtr = decltype(std::declval<torch::autograd::Edge&>().function);

template <typename T, typename P>
struct NodeMaker;
template <typename T>
struct NodeMaker<T, std::shared_ptr<Node>> {
  static std::shared_ptr<Node> make() {
    // deleteNode (found by argument-dependent lookup) frees long chains of nodes iteratively.
    return std::shared_ptr<T>(new T(), [](T* p) { deleteNode(p); });
  }
};
template <typename T>
struct NodeMaker<T, c10::intrusive_ptr<Node>> {
  static c10::intrusive_ptr<Node> make() { return c10::make_intrusive<T>(); }
};

// A node's owning pointer to itself (getptr() where it exists, else shared_from_this()).
template <typename N>
auto self_ptr(N* n, int) -> decltype(n->getptr()) {
  return n->getptr();
}
template <typename N>
auto self_ptr(N* n, long) -> decltype(n->shared_from_this()) {
  return n->shared_from_this();
}

bool is_one(const c10::Scalar& s) {
  if (s.isComplex()) return s.toComplexDouble() == c10::complex<double>(1.0, 0.0);
  return s.toDouble() == 1.0;
}

// The part of M (shape of A) that the solve reads: the named triangle, without the diagonal
// when unitriangular.
at::Tensor project(const at::Tensor& M, bool upper, bool unit) {
  return upper ? M.triu(unit ? 1 : 0) : M.tril(unit ? -1 : 0);
}

// op(M).
at::Tensor apply_op(const at::Tensor& M, Trans trans) {
  return trans == Trans::kN ? M : (trans == Trans::kT ? M.mT() : M.mH());
}

bool has_fw_grad(const at::Tensor& t) { return t.defined() && t._fw_grad(/*level=*/0).defined(); }

// t in dtype d (t itself when it has it).
at::Tensor in_dtype(const at::Tensor& t, at::ScalarType d) { return t.scalar_type() == d ? t : t.to(d); }

// The tensor without its forward-mode tangent (what generated kernels call the primal), so that
// the tangent computation does not itself carry tangents.
at::Tensor primal(const at::Tensor& t) { return has_fw_grad(t) ? t._fw_primal(/*level=*/0) : t; }

// The backward formula: (gA, gB) from the cotangent gX (see the top of the file).
struct SolveFlags {
  bool left = true, upper = false, unit = false;
  Trans trans = Trans::kN;
  c10::Scalar alpha = 1;
};

variable_list trsm_backward(const at::Tensor& A, const at::Tensor& X, const at::Tensor& gX, const SolveFlags& f,
                            bool want_a, bool want_b, c10::SymIntArrayRef a_shape, c10::SymIntArrayRef b_shape) {
  variable_list out(2);
  if (!gX.defined() || !(want_a || want_b)) return out;
  // G = T^{-H} gX (left) or gX T^{-H} (right). T^H for op N is A^H ('C'), for 'C' it is A
  // ('N'), for 'T' it is conj(A) (a conj view, solved with 'N').
  const at::Tensor Aadj = (f.trans == Trans::kT && A.is_complex()) ? A.conj() : A;
  const char* tadj = f.trans == Trans::kN ? "C" : "N";
  const at::Tensor G = call_trsm(Aadj, want_a ? in_dtype(gX, A.scalar_type()) : gX, f.left, f.upper, tadj, f.unit, 1);
  if (want_b) {
    const at::Tensor gB = is_one(f.alpha) ? G : G * f.alpha.conj();
    out[1] = in_dtype(at::sum_to(gB, b_shape), gX.scalar_type());
  }
  if (want_a) {
    // The minus sign on G (k x n or m x k), not on the k x k product; the projection in place
    // where the product is not a conj view: one k x k temporary in all.
    const at::Tensor Gn = in_dtype(G, A.scalar_type()).neg();
    const at::Tensor Xh = in_dtype(X, A.scalar_type()).mH();
    at::Tensor gT = f.left ? at::matmul(Gn, Xh) : at::matmul(Xh, Gn);
    if (f.trans == Trans::kT) gT = gT.mT();
    if (f.trans == Trans::kC) gT = gT.mH();
    if (gT.is_conj())
      gT = project(gT, f.upper, f.unit);
    else
      f.upper ? gT.triu_(f.unit ? 1 : 0) : gT.tril_(f.unit ? -1 : 0);
    out[0] = at::sum_to(gT, a_shape);
  }
  return out;
}

// The hand-made node (forward mode, functorch).
struct TrsmBackward : public Node {
  std::string name() const override { return "HsmaTrsmBackward"; }

  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    A_.reset_data();
    X_.reset_data();
  }

  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool want_a = task_should_compute_output(0), want_b = task_should_compute_output(1);
    if (!grads[0].defined() || !(want_a || want_b)) return variable_list(2);
    return trsm_backward(A_.unpack(), X_.unpack(self_ptr(this, 0)), grads[0], flags, want_a, want_b, a_shape,
                         b_shape);
  }

  SavedVariable A_, X_;
  SolveFlags flags;
  std::vector<c10::SymInt> a_shape, b_shape;  // symbolic under torch.compile(dynamic=True)
};

// The torch::autograd::Function (reverse mode outside functorch transforms).
class TrsmFunction : public torch::autograd::Function<TrsmFunction> {
 public:
  // The backward reads only saved_data and the saved tensors and calls dispatcher ops, so
  // compiled autograd may trace it into its graph instead of calling it opaquely.
  static constexpr bool is_traceable = true;

  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& A, const at::Tensor& B,
                            bool left, bool upper, Trans trans, bool unit, const c10::Scalar& alpha) {
    at::Tensor X;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      X = call_trsm(A, B, left, upper, trans_name(trans), unit, alpha);
    }
    ctx->saved_data["left"] = left;
    ctx->saved_data["upper"] = upper;
    ctx->saved_data["trans"] = std::string(trans_name(trans));
    ctx->saved_data["unit"] = unit;
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["a_shape"] = A.sym_sizes();
    ctx->saved_data["b_shape"] = B.sym_sizes();
    ctx->save_for_backward({A, X});
    return X;
  }

  static variable_list backward(torch::autograd::AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    SolveFlags f;
    f.left = ctx->saved_data["left"].toBool();
    f.upper = ctx->saved_data["upper"].toBool();
    f.trans = static_cast<Trans>(ctx->saved_data["trans"].toStringRef()[0]);  // saved by forward: N, T or C
    f.unit = ctx->saved_data["unit"].toBool();
    f.alpha = ctx->saved_data["alpha"].toScalar();
    const std::vector<c10::SymInt> a_shape = ctx->saved_data["a_shape"].toSymIntVector();
    const std::vector<c10::SymInt> b_shape = ctx->saved_data["b_shape"].toSymIntVector();
    variable_list g = trsm_backward(saved[0], saved[1], grads[0], f, ctx->needs_input_grad(0),
                                    ctx->needs_input_grad(1), a_shape, b_shape);
    g.resize(7);  // no gradient for the non-tensor arguments
    return g;
  }
};

// Whether a torch::autograd::Function may be used here: not inside functorch transforms (the
// same test Function::apply makes, which raises there).
bool cpp_function_allowed() {
  const auto& tls = at::functorch::functorchTLSAccessor();
  if (!tls) return true;
  try {
    tls->checkSupportsCppAutogradFunction();
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

// The tangent of X, given X (a plain tensor) and the tangents dA, dB (either may be undefined).
at::Tensor trsm_tangent(const at::Tensor& A, const at::Tensor& X, const at::Tensor& dA, const at::Tensor& dB, bool left,
                        bool upper, Trans trans, bool unit, const c10::Scalar& alpha) {
  if (!dA.defined()) return call_trsm(A, dB, left, upper, trans_name(trans), unit, alpha);
  const at::Tensor dT = apply_op(project(dA, upper, unit), trans);
  const at::Tensor Xw = in_dtype(X, dT.scalar_type());
  at::Tensor rhs = left ? at::matmul(dT, Xw) : at::matmul(Xw, dT);  // dT X or X dT
  if (dB.defined()) {
    rhs = (is_one(alpha) ? dB : dB * alpha) - rhs;
  } else {
    rhs = -rhs;
  }
  return in_dtype(call_trsm(A, rhs, left, upper, trans_name(trans), unit, 1), X.scalar_type());
}

at::Tensor trsm_autograd(const at::Tensor& A, const at::Tensor& B, bool left, bool upper, c10::string_view trans,
                         bool unitriangular, const c10::Scalar& alpha) {
  const bool need_graph = torch::autograd::compute_requires_grad(A, B);
  const bool need_tangent = has_fw_grad(A) || has_fw_grad(B);
  if (!need_graph && !need_tangent) {
    // Fast path: no gradient of either kind is wanted; no node, nothing saved.
    at::AutoDispatchBelowADInplaceOrView guard;
    return call_trsm(A, B, left, upper, trans, unitriangular, alpha);
  }
  const Trans t = parse_trans(trans);
  if (!need_tangent && cpp_function_allowed()) {
    return TrsmFunction::apply(A, B, left, upper, t, unitriangular, alpha);
  }

  NodePtr node;
  TrsmBackward* fn = nullptr;
  if (need_graph) {
    node = NodeMaker<TrsmBackward, NodePtr>::make();
    fn = static_cast<TrsmBackward*>(node.get());
    fn->set_next_edges(torch::autograd::collect_next_edges(A, B));
    fn->flags.left = left;
    fn->flags.upper = upper;
    fn->flags.trans = t;
    fn->flags.unit = unitriangular;
    fn->flags.alpha = alpha;
    fn->a_shape = A.sym_sizes().vec();
    fn->b_shape = B.sym_sizes().vec();
    fn->A_ = SavedVariable(A, /*is_output=*/false);
  }

  at::Tensor X;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    X = call_trsm(A, B, left, upper, trans_name(t), unitriangular, alpha);
  }
  if (node) torch::autograd::set_history(X, node);

  if (need_tangent) {
    const at::Tensor dA = has_fw_grad(A) ? A._fw_grad(0) : at::Tensor();
    const at::Tensor dB = has_fw_grad(B) ? B._fw_grad(0) : at::Tensor();
    const at::Tensor dX = trsm_tangent(primal(A), X, dA, dB, left, upper, t, unitriangular, alpha);
    X._set_fw_grad(dX, /*level=*/0, /*is_inplace_op=*/false);
  }
  if (fn) fn->X_ = SavedVariable(X, /*is_output=*/true);
  return X;
}

}  // namespace
}  // namespace hsma

TORCH_LIBRARY_IMPL(hsma, Autograd, m) { m.impl("trsm", &hsma::trsm_autograd); }
