// How a (batched) matrix product maps onto one column-major BLAS call (cuBLAS / cuBLASLt):
// which operand is read in place, transposed or not, with which leading dimension and batch
// stride, and which must be copied first. Pure host arithmetic on sizes and strides, used by the
// CUDA matmul and linear and exposed so tests can check every layout decision without a GPU.
//
// A row-major product C (M, N) = A (M, K) B (K, N) is, read column-major, C^T = B^T A^T: the BLAS
// computes C^T (m = N, n = M) from its first operand op(b) (N, K) and its second op(a) (K, M).
// A row-major matrix with row stride ld is a column-major one of the transposed shape with the
// same ld, so a row-major operand goes in untransposed (op N) and a column-major one (its
// transpose is row-major: a .t() view) goes in with op T. The output is always a fresh
// contiguous (batch..., M, N) tensor.
#pragma once
#include <cstdint>

#include "brisk/core/tensor.h"

namespace brisk::kernels {

// What to do with an operand before the BLAS call.
enum class OperandAction : uint8_t {
  InPlace,     // read as it is
  Contiguous,  // copy to a contiguous tensor of its own shape, then read that
  Expand,      // copy expanded to the full broadcast batch (its batch dims cannot be one stride)
};

// How the BLAS reads one operand: the stored column-major matrix is (rows, cols) with leading
// dimension ld; `trans` applies op T to it. Matrix i of the batch starts batch_stride * i
// elements after the first (0: the same matrix for the whole batch).
struct BlasOperand {
  OperandAction action = OperandAction::InPlace;
  bool trans = false;
  int64_t rows = 0, cols = 0, ld = 1;
  int64_t batch_stride = 0;
};

struct MatmulPlan {
  Shape batch;              // the broadcast batch dims of the product
  int64_t batch_count = 1;  // matrices per BLAS call (1 when folded)
  // a's batch dims and its M rows are one evenly strided run of rows while b is the same matrix
  // for every batch entry: one (batch * M, K) x (K, N) product instead of a batch of small ones.
  bool folded = false;
  int64_t m = 0, n = 0, k = 0;  // the BLAS's sizes: m = N, n = M (times the batch when folded), k = K
  BlasOperand a;                // the left operand a: the BLAS's second operand ("B")
  BlasOperand b;                // the right operand b: the BLAS's first operand ("A")
  int64_t ldc = 1;              // = m: the row-major output's row length
  int64_t stride_c = 0;         // = m * n: elements per batch entry of the output
  // Every size, leading dimension and the batch count fit in int32 (cuBLASLt's usual limit).
  bool fits_int32 = true;

  bool in_place() const { return a.action == OperandAction::InPlace && b.action == OperandAction::InPlace; }
};

// a: (batch_a..., M, K), b: (batch_b..., K, N), both at least 2-D (promote 1-D operands to a row
// or a column first), batch dims broadcastable, and M, N, K >= 1 (empty products need no BLAS).
// Any strides. When the result says an operand needs a copy, make it, then plan again: a plan
// for contiguous (or expanded and contiguous) operands always reads them in place.
MatmulPlan plan_matmul(const Shape& a_sizes, const Strides& a_strides, const Shape& b_sizes, const Strides& b_strides);

}  // namespace brisk::kernels
