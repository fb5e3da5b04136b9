// Host-side description of one torch.ops.hsma.trsm call: argument checks shared by every
// backend, the broadcast result shape, and the block-size choice of the blocked path.
#pragma once
#include <ATen/ATen.h>

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

// The dtypes with kernels: float32, float64, complex64, complex128.
bool supported_dtype(at::ScalarType t);

// Parses trans ('N', 'T', 'C', either case); raises ValueError naming the argument otherwise.
Trans parse_trans(c10::string_view trans);

// The schema's arguments as TrsmArgs (trans parsed).
TrsmArgs make_args(bool left, bool upper, c10::string_view trans, bool unit, const c10::Scalar& alpha);

// Checks A, B and the arguments (dimensions, squareness, m/n agreement, dtype, device,
// broadcastable batch dims, alpha's type) and returns the shapes. `op` names the caller in errors.
TrsmShape check_trsm(const at::Tensor& A, const at::Tensor& B, const TrsmArgs& args, const char* op);

// torch.ops.hsma.trsm by a typed (unboxed) dispatcher call: every dispatch key (autograd,
// functorch, Python modes, profiler) is honoured, with no Python argument parsing.
at::Tensor call_trsm(const at::Tensor& A, const at::Tensor& B, bool left, bool upper, c10::string_view trans,
                     bool unit, const c10::Scalar& alpha);

// Extra checks for the in-place form: B must already have the result's shape, must not have
// overlapping memory, and must not share memory with A.
void check_inplace(const at::Tensor& A, const at::Tensor& B, const TrsmShape& s, const char* op);

// The blocked path's shape: outer block NB and the driver variant
// (recursive: X1 = solve(T11, B1); B2 -= T21 X1; X2 = solve(T22, B2), leaves of NB rows;
//  blocked: left-looking block rows, X_k = inv(T_kk) (alpha B_k - T_k,<k X_<k)).
enum class BlockedVariant { kRecursive, kBlocked };
struct BlockChoice {
  int64_t nb;
  BlockedVariant variant;
  std::string source;   // "default", "table <path> (size s)", "override nb", ...
  bool forced = false;  // nb forced by the overrides: no rule changes it
};
constexpr int64_t kDiagInverseMaxNBHost = 1024;

// The block-size table for a GPU (see csrc/tuning.cpp); "" when no directory is known.
std::string table_path_for(const std::string& gpu, const std::string& capability);
// Nearest-size lookup in the table at `path` (overrides applied); never throws for a bad table.
BlockChoice lookup_blocking(const std::string& path, const std::string& gpu, const std::string& capability,
                            at::ScalarType dtype, int64_t k);
const char* variant_name(BlockedVariant v);

}  // namespace hsma
