// Host-side description of one torch.ops.hsma.trsm call: the arguments, the checks shared by
// every backend, and the broadcast result shape.
#pragma once
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <array>
#include <optional>
#include <string>
#include <vector>

// Argument checks that raise RuntimeError (c10::Error).
//
// Messages are built from strings only: numbers go through hsma::num / hsma::shape (std::to_string),
// never through std::ostream. The H200 machine's toolchain (/opt/gcc) links a private copy of
// libstdc++ into the extension, and formatting an integer with that copy's ostream (c10::str of a
// size or a shape) crashed the process (segfault in num_put), so every error naming a shape did.
#define HSMA_CHECK(cond, ...)                                      \
  do {                                                             \
    if (C10_UNLIKELY(!(cond))) {                                   \
      throw ::c10::Error(::c10::str(__VA_ARGS__), nullptr);        \
    }                                                              \
  } while (false)

namespace hsma {

inline std::string num(int64_t v) { return std::to_string(v); }
inline std::string shape(c10::IntArrayRef s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// op(A): A, A^T or A^H. The schema takes a string; each kernel's entry parses it once
// (make_args) and everything after works with the enum.
enum class Trans : char { kN = 'N', kT = 'T', kC = 'C' };
inline const char* trans_name(Trans t) { return t == Trans::kN ? "N" : (t == Trans::kT ? "T" : "C"); }

// What the op was asked to do, in BLAS terms.
struct TrsmArgs {
  bool left = true;        // side: op(A) X = alpha B (left) or X op(A) = alpha B (right)
  bool upper = false;      // uplo: which triangle of A is read
  Trans trans = Trans::kN;
  bool unit = false;       // diag: unit diagonal, never read
  c10::Scalar alpha = 1;
};

// The validated shapes: A (*, k, k), B (*, m, n), result (batch..., m, n).
struct TrsmShape {
  int64_t k = 0, m = 0, n = 0;
  std::vector<int64_t> batch;   // broadcast batch shape
  std::vector<int64_t> result;  // batch + {m, n}
  int64_t batch_numel() const {
    int64_t p = 1;
    for (auto s : batch) p *= s;
    return p;
  }
};

// The dtypes trsm and trtri take, in the order errors and hsma_trsm._C.trsm_dtypes list them; the last two are
// the half types, solved in float32 arithmetic with the result rounded once to the input's dtype. The solvers
// (cholesky_solve, cholesky_inverse, lu_solve) take the first four, as torch's do. Python reads these lists
// (hsma_trsm._C), it keeps no copy.
inline constexpr std::array<at::ScalarType, 6> kTrsmDtypes = {at::kFloat,         at::kDouble,   at::kComplexFloat,
                                                              at::kComplexDouble, at::kBFloat16, at::kHalf};
inline constexpr std::array<at::ScalarType, 2> kHalfDtypes = {at::kBFloat16, at::kHalf};
inline constexpr std::array<at::ScalarType, 4> kSolverDtypes = {at::kFloat, at::kDouble, at::kComplexFloat,
                                                                at::kComplexDouble};
template <size_t N> constexpr bool dtype_in(const std::array<at::ScalarType, N>& set, at::ScalarType t) {
  for (const auto s : set)
    if (s == t) return true;
  return false;
}
inline bool supported_dtype(at::ScalarType t) { return dtype_in(kTrsmDtypes, t); }
inline bool half_dtype(at::ScalarType t) { return dtype_in(kHalfDtypes, t); }
// The A of a 16-bit B may also be float32 (flash-linear-attention holds its triangles in float32 beside bfloat16
// keys): trsm takes the pair without promoting and X has B's dtype (float32 arithmetic, rounded once). Every
// other A has B's dtype.
inline constexpr at::ScalarType kHalfPartner = at::kFloat;
inline bool trsm_dtypes_agree(at::ScalarType a, at::ScalarType b) {
  return a == b || (a == kHalfPartner && half_dtype(b));
}
inline bool solver_dtype(at::ScalarType t) { return dtype_in(kSolverDtypes, t); }
// t converted to float32, its broadcast (stride-0) dims converted once and expanded again.
at::Tensor as_float32(const at::Tensor& t);
// `what(S)` for each of their C++ types (explicit instantiations of the CUDA backend's templates).
#define HSMA_FOR_EACH_DTYPE(what) what(float) what(double) what(c10::complex<float>) what(c10::complex<double>)

// Parses trans ('N', 'T', 'C', either case); raises ValueError naming the argument otherwise.
Trans parse_trans(c10::string_view trans);

// The schema's arguments as TrsmArgs (trans parsed).
TrsmArgs make_args(bool left, bool upper, c10::string_view trans, bool unit, const c10::Scalar& alpha);

// Checks A, B and the arguments (dimensions, squareness, m/n agreement, dtype, device,
// broadcastable batch dims, alpha's type) and returns the shapes. `op` names the caller in errors.
TrsmShape check_trsm(const at::Tensor& A, const at::Tensor& B, const TrsmArgs& args, const char* op);

// X of op(A) X = alpha B (or X op(A) = alpha B), written into X (the broadcast result's shape), by ATen's
// linalg_solve_triangular (LAPACK trsm on the CPU, cuBLAS trsm on CUDA) through its out= overload, which the
// switch never routes; a bfloat16 / float16 B (with A of its dtype or float32) solved in float32 and rounded to
// B's dtype. The CPU kernel, and the CUDA plan's path kAten (csrc/planner.h). Defined in csrc/exec_aten.cpp.
void aten_solve_into(const at::Tensor& A, const at::Tensor& B, const TrsmArgs& args, at::Tensor& X);

// Whether hsma's plan hands the solve op(A) X = B (CUDA, order above 64, operands trsm takes) to torch's own
// kernel (csrc/paths.h): then the drop-in's eager entry and the switch call torch's function themselves. False
// for anything trsm would refuse, which is left to trsm to raise.
bool plan_hands_off(const at::Tensor& A, const at::Tensor& B, bool left, bool upper, c10::string_view trans,
                    bool unit);

// The layout of torch.linalg.solve_triangular's result (its meta function), which the switch's kernel and the
// drop-in's out= both give: row-major matrices where A, broadcast against B, is a conjugate view whose transpose
// is contiguous (torch then solves without copying A), column-major otherwise.
bool torch_solve_row_major(const at::Tensor& A, const at::Tensor& B);

// The typed handle of a torch.ops.hsma operator, e.g. hsma_op<at::Tensor(const at::Tensor&, bool)>("hsma::x");
// callers keep it in a function-local static.
template <typename Signature> c10::TypedOperatorHandle<Signature> hsma_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

// torch.ops.hsma.trsm by a typed (unboxed) dispatcher call: every dispatch key (autograd,
// functorch, Python modes, profiler) is honoured, with no Python argument parsing.
at::Tensor call_trsm(const at::Tensor& A, const at::Tensor& B, bool left, bool upper, c10::string_view trans,
                     bool unit, const c10::Scalar& alpha);

// Checks the argument of torch.ops.hsma.trtri (dimensions, squareness, dtype; out_dtype a supported
// dtype, complex exactly when A is) and returns the result's dtype.
at::ScalarType check_trtri(const at::Tensor& A, std::optional<at::ScalarType> out_dtype, const char* op);
// inv(A) of triangular A (upper or lower; unit: the diagonal is 1, not read) by a solve against an
// identity (bfloat16 / float16 in float32), projected on the triangle, in dtype `out`.
at::Tensor trtri_by_solve(const at::Tensor& A, bool upper, bool unit, at::ScalarType out);

// Extra checks for the in-place form: B must already have the result's shape, must not have
// overlapping memory, and must not share memory with A.
void check_inplace(const at::Tensor& A, const at::Tensor& B, const TrsmShape& s, const char* op);

}  // namespace hsma
