// Autograd of torch.ops.hsma.trsm, in C++ so that a call with no gradient wanted costs no
// Python (the Autograd kernel is on every call's path).
//
// With T = op(A) and X the forward result:
//   left:  T X = alpha B  ->  G = T^{-H} gX,  gB = conj(alpha) G,  gT = -G X^H
//   right: X T = alpha B  ->  G = gX T^{-H},  gB = conj(alpha) G,  gT = -X^H G
// gA is gT mapped back through op (T = A^T: gA = gT^T; T = A^H: gA = gT^H), projected on the
// triangle that was read (strictly, with a unit diagonal) and summed over broadcast batch dims.
// The adjoint solve calls the op through the dispatcher, so double backward works.
#include <ATen/ExpandUtils.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <string>

#include "trsm.h"

namespace hsma {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor call_trsm(const at::Tensor& A, const at::Tensor& B, bool left, bool upper, c10::string_view trans,
                     bool unit, const c10::Scalar& alpha) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("hsma::trsm", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, bool, bool, c10::string_view, bool,
                                         const c10::Scalar&)>();
  return op.call(A, B, left, upper, trans, unit, alpha);
}

bool is_one(const c10::Scalar& s) {
  if (s.isComplex()) return s.toComplexDouble() == c10::complex<double>(1.0, 0.0);
  return s.toDouble() == 1.0;
}

class TrsmFunction : public torch::autograd::Function<TrsmFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& A, const at::Tensor& B, bool left, bool upper,
                            c10::string_view trans, bool unit, const c10::Scalar& alpha) {
    at::Tensor X;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      X = call_trsm(A, B, left, upper, trans, unit, alpha);
    }
    ctx->saved_data["left"] = left;
    ctx->saved_data["upper"] = upper;
    ctx->saved_data["trans"] = std::string(1, parse_trans(trans));
    ctx->saved_data["unit"] = unit;
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["a_shape"] = A.sizes().vec();
    ctx->saved_data["b_shape"] = B.sizes().vec();
    ctx->save_for_backward({A, X});
    return X;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& A = saved[0];
    const at::Tensor& X = saved[1];
    const at::Tensor& gX = grads[0];
    const bool left = ctx->saved_data["left"].toBool();
    const bool upper = ctx->saved_data["upper"].toBool();
    const char trans = ctx->saved_data["trans"].toStringRef()[0];
    const bool unit = ctx->saved_data["unit"].toBool();
    const c10::Scalar alpha = ctx->saved_data["alpha"].toScalar();
    variable_list out(7);
    if (!gX.defined()) return out;

    // G = T^{-H} gX (left) or gX T^{-H} (right). T^H for op N is A^H ('C'), for 'C' it is A
    // ('N'), for 'T' it is conj(A) (a conj view, solved with 'N').
    const at::Tensor Aadj = (trans == 'T' && A.is_complex()) ? A.conj() : A;
    const char* tadj = trans == 'N' ? "C" : "N";
    const at::Tensor G = call_trsm(Aadj, gX, left, upper, tadj, unit, 1);

    if (ctx->needs_input_grad(1)) {
      const at::Tensor gB = is_one(alpha) ? G : G * alpha.conj();
      out[1] = at::sum_to(gB, ctx->saved_data["b_shape"].toIntVector());
    }
    if (ctx->needs_input_grad(0)) {
      at::Tensor gT = left ? -at::matmul(G, X.mH()) : -at::matmul(X.mH(), G);
      if (trans == 'T') gT = gT.mT();
      if (trans == 'C') gT = gT.mH();
      const at::Tensor gA = upper ? gT.triu(unit ? 1 : 0) : gT.tril(unit ? -1 : 0);
      out[0] = at::sum_to(gA, ctx->saved_data["a_shape"].toIntVector());
    }
    return out;
  }
};

at::Tensor trsm_autograd(const at::Tensor& A, const at::Tensor& B, bool left, bool upper, c10::string_view trans,
                         bool unitriangular, const c10::Scalar& alpha) {
  return TrsmFunction::apply(A, B, left, upper, trans, unitriangular, alpha);
}

}  // namespace
}  // namespace hsma

TORCH_LIBRARY_IMPL(hsma, Autograd, m) { m.impl("trsm", &hsma::trsm_autograd); }
