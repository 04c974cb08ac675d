#pragma once
// Matrix products in the portable arithmetic (docs/portable.md, "Matrix products").
//
// Every output C[i][j] is one sequential chain over k = 0, 1, ..., K-1:
//
//   c = +0.0 (or C[i][j] with accumulate);  for k: c = fma(A[i][k], B[k][j], c)
//
// each step one fused multiply-add, rounded once (the only fused operation of the portable
// arithmetic: docs/portable.md). Blocking over k keeps the partial chain in C between blocks,
// vector lanes hold different j, threads hold different tiles of C: none of them changes the
// order of one chain, so the bits are the same for any instruction set, block size and thread
// count.

#include <cstdint>

namespace vt::kernels {

// Element (r, c) of a matrix is data[r * row_stride + c * col_stride], or, where row_offsets is
// set, data[row_offsets[r] + c * col_stride]: a convolution's column matrix read where it lies in
// the zero-padded input (conv.cpp). A right operand with row offsets has col_stride 1.
struct MatrixRef {
  const float* data = nullptr;
  std::int64_t row_stride = 0;
  std::int64_t col_stride = 1;
  const std::int64_t* row_offsets = nullptr;

  const float* row(std::int64_t r) const {
    return data + (row_offsets != nullptr ? row_offsets[r] : r * row_stride);
  }
};

// Where problem `index` of a batch starts, in floats from problem 0: index · stride, or, for
// problems in groups (the heads of each example of a batch, read where they lie in one
// [tokens, 3 · heads · head width] buffer), (index / group) · group_stride + (index % group) ·
// stride.
struct BatchStride {
  BatchStride(std::int64_t stride)  // NOLINT(google-explicit-constructor): a plain stride reads so
      : stride(stride) {}
  BatchStride(std::int64_t stride, std::int64_t group, std::int64_t group_stride)
      : stride(stride), group(group), group_stride(group_stride) {}
  std::int64_t offset(std::int64_t index) const {
    return group > 0 ? index / group * group_stride + index % group * stride : index * stride;
  }
  std::int64_t stride = 0;
  std::int64_t group = 0;  // 0: one stride for all
  std::int64_t group_stride = 0;
};

// `batch` independent products C_b = A_b · B_b (A_b: M×K, B_b: K×N, C_b: M×N row-major with
// leading dimension ldc), each operand of problem b where its BatchStride puts it.
void gemm(std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K, MatrixRef a,
          BatchStride a_batch, MatrixRef b, BatchStride b_batch, float* c, std::int64_t ldc,
          BatchStride c_batch, bool accumulate);

// One product, C = A · B (or C += with accumulate).
inline void gemm(std::int64_t M, std::int64_t N, std::int64_t K, MatrixRef a, MatrixRef b, float* c,
                 std::int64_t ldc, bool accumulate = false) {
  gemm(1, M, N, K, a, 0, b, 0, c, ldc, 0, accumulate);
}

// Rows of C in one micro-kernel tile of an N-column product on this machine: a product cut by
// rows into multiples of it has no partial tile to pad.
std::int64_t gemm_tile_rows(std::int64_t N);

// out[j] = chain over i = 0..rows-1 of x[i*ld + j], from +0.0 (a bias gradient: the column sums
// of a row-major matrix, each one sequential chain over the rows).
void column_sums(std::int64_t rows, std::int64_t cols, const float* x, std::int64_t ld, float* out);

}  // namespace vt::kernels
