// Host-side description of one torch.ops.hsma.trsm call: argument checks shared by every
// backend, the broadcast result shape, and the block-size choice of the blocked path.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace hsma {

// What the op was asked to do, in BLAS terms.
struct TrsmArgs {
  bool left = true;      // side: op(A) X = alpha B (left) or X op(A) = alpha B (right)
  bool upper = false;    // uplo: which triangle of A is read
  char trans = 'N';      // op(A) = A, A^T or A^H ('N', 'T', 'C')
  bool unit = false;     // diag: unit diagonal, never read
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

// Parses trans ('N', 'T', 'C', either case); raises ValueError naming the argument otherwise.
char parse_trans(c10::string_view trans);

// Checks A, B and the arguments (dimensions, squareness, m/n agreement, dtype, device,
// broadcastable batch dims, alpha's type) and returns the shapes. `op` names the caller in errors.
TrsmShape check_trsm(const at::Tensor& A, const at::Tensor& B, const TrsmArgs& args, const char* op);

// Extra checks for the in-place form: B must already have the result's shape and must not
// have overlapping memory.
void check_inplace(const at::Tensor& B, const TrsmShape& shape, const char* op);

// Outer block size NB for the blocked path (HSMA_TRSM_NB overrides; else 128).
int64_t choose_block_size(at::ScalarType dtype, int64_t k);

}  // namespace hsma
