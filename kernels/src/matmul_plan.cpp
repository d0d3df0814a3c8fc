// Layout planning for BLAS matrix products (see brisk/kernels/matmul_plan.h).
#include "brisk/kernels/matmul_plan.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "brisk/util/error.h"

namespace brisk::kernels {

namespace {

// How a (rows, cols) matrix with row stride rs and column stride cs can be read in place:
// row-major with leading dimension ld (trans = false), or column-major (trans = true). The same
// rule as the CPU GEMM's: size-1 dims may have any stride.
struct Layout {
  bool trans = false;
  int64_t ld = 1;
};
std::optional<Layout> matrix_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cols == 1 || cs == 1) {
    const int64_t ld = rows == 1 ? cols : rs;
    if (ld >= std::max<int64_t>(cols, 1)) return Layout{false, ld};
  }
  if (rows == 1 || rs == 1) {
    const int64_t ld = cols == 1 ? rows : cs;
    if (ld >= std::max<int64_t>(rows, 1)) return Layout{true, ld};
  }
  return std::nullopt;
}

// The strides of an operand's batch dims lined up with the broadcast batch (0 where the operand
// has no such dim or has size 1 there).
Strides aligned_batch_strides(const Shape& batch, const Shape& sizes, const Strides& strides) {
  const size_t nb = batch.size(), tb = sizes.size() - 2;
  Strides st(nb, 0);
  for (size_t d = 0; d < tb; ++d)
    if (sizes[d] != 1) st[nb - tb + d] = strides[d];
  return st;
}

// s such that matrix i of the flattened batch starts s * i elements after the first, if the
// batch dims allow one such stride (0: a single matrix for the whole batch).
std::optional<int64_t> uniform_stride(const Shape& batch, const Strides& st) {
  std::optional<int64_t> s;
  int64_t inner = 1;  // batch entries inside dim d
  for (size_t i = batch.size(); i-- > 0;) {
    if (batch[i] == 1) continue;  // never moves
    if (!s) s = st[i];
    if (st[i] != *s * inner) return std::nullopt;
    inner *= batch[i];
  }
  return s.value_or(0);
}

BlasOperand plan_operand(const Shape& batch, const Shape& sizes, const Strides& strides) {
  const size_t nd = sizes.size();
  const int64_t rows = sizes[nd - 2], cols = sizes[nd - 1];
  const auto layout = matrix_layout(rows, cols, strides[nd - 2], strides[nd - 1]);
  const auto bs = uniform_stride(batch, aligned_batch_strides(batch, sizes, strides));
  BlasOperand o;
  if (!layout || !bs) {
    // A contiguous copy fixes the matrix layout; only a broadcast pattern that no single stride
    // describes (a (2, 1) batch against a (1, 3) one) needs the copy expanded to the full batch.
    const bool own_batch_ok =
        uniform_stride(batch, aligned_batch_strides(batch, sizes, contiguous_strides(sizes))).has_value();
    o.action = own_batch_ok ? OperandAction::Contiguous : OperandAction::Expand;
    return o;
  }
  // A row-major (rows, cols) matrix is a column-major (cols, rows) one with the same ld.
  o.trans = layout->trans;
  o.ld = layout->ld;
  o.rows = o.trans ? rows : cols;
  o.cols = o.trans ? cols : rows;
  o.batch_stride = *bs;
  return o;
}

// The row stride that steps through every row of a's batch dims and its M dim in order, when
// they form one evenly strided run (so the batch is a single (batch * M, K) matrix).
std::optional<int64_t> folded_row_stride(const Shape& sizes, const Strides& strides) {
  std::optional<int64_t> stride;
  int64_t extent = 1;  // rows covered so far, innermost first
  for (size_t i = sizes.size() - 1; i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (!stride)
      stride = strides[i];
    else if (strides[i] != *stride * extent)
      return std::nullopt;
    extent *= sizes[i];
  }
  return stride ? stride : std::optional<int64_t>(sizes.back());
}

}  // namespace

MatmulPlan plan_matmul(const Shape& a_sizes, const Strides& a_strides, const Shape& b_sizes, const Strides& b_strides) {
  BRISK_CHECK(a_sizes.size() >= 2 && b_sizes.size() >= 2 && a_strides.size() == a_sizes.size() &&
                  b_strides.size() == b_sizes.size(),
              "plan_matmul: expected matrices (at least 2-D with matching strides), got ", a_sizes, " and ", b_sizes);
  const int64_t M = a_sizes[a_sizes.size() - 2], K = a_sizes.back(), N = b_sizes.back();
  BRISK_CHECK(b_sizes[b_sizes.size() - 2] == K, "plan_matmul: inner sizes differ: ", a_sizes, " and ", b_sizes);
  BRISK_CHECK(M >= 1 && N >= 1 && K >= 1, "plan_matmul: empty products need no BLAS call: ", a_sizes, " and ", b_sizes);
  MatmulPlan p;
  const size_t na = a_sizes.size() - 2, nb = b_sizes.size() - 2, nd = std::max(na, nb);
  p.batch.resize(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t x = i < nd - na ? 1 : a_sizes[i - (nd - na)];
    const int64_t y = i < nd - nb ? 1 : b_sizes[i - (nd - nb)];
    BRISK_CHECK(x == y || x == 1 || y == 1, "plan_matmul: batch dims of ", a_sizes, " and ", b_sizes,
                " cannot be broadcast");
    p.batch[i] = x == 1 ? y : x;
  }
  p.batch_count = shape_numel(p.batch);
  p.a = plan_operand(p.batch, a_sizes, a_strides);
  p.b = plan_operand(p.batch, b_sizes, b_strides);
  p.m = N;
  p.n = M;
  p.k = K;
  if (p.in_place() && p.batch_count > 1 && p.b.batch_stride == 0 && !p.a.trans) {
    const Shape a_batch(a_sizes.begin(), a_sizes.end() - 2);
    const auto rs = folded_row_stride(a_sizes, a_strides);
    if (shape_numel(a_batch) == p.batch_count && rs && *rs >= K) {
      p.folded = true;
      p.n = p.batch_count * M;
      p.batch_count = 1;
      p.a.cols = p.n;
      p.a.ld = *rs;
      p.a.batch_stride = 0;
    }
  }
  p.ldc = p.m;
  p.stride_c = p.m * p.n;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  p.fits_int32 = p.m <= kMax && p.n <= kMax && p.k <= kMax && p.a.ld <= kMax && p.b.ld <= kMax && p.batch_count <= kMax;
  return p;
}

}  // namespace brisk::kernels
