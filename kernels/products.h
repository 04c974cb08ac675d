#pragma once
// Batched matrix products with a scaled addend (docs/portable.md, "Products"): bmm, baddbmm,
// mm, addmm, matmul all reduce to these. Each element's product chain is gemm.h's.

#include <cstdint>

namespace vt::kernels {

// y_n = (alpha·(a_n·b_n)) + beta·c_n for n < batch (a_n [M, K], b_n [K, N], c_n and y_n [M, N],
// contiguous, one after another). c may be null: y = alpha·(a·b). alpha = 1 and beta = 1 are
// exact multiplications, skipped.
void baddbmm(std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K, const float* a,
             const float* b, const float* c, float alpha, float beta, float* y);
// da = (dy·alpha)·bᵀ, db = aᵀ·(dy·alpha), dc = dy·beta; any output may be null.
void baddbmm_backward(std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K,
                      const float* a, const float* b, const float* dy, float alpha, float beta,
                      float* da, float* db, float* dc);

}  // namespace vt::kernels
