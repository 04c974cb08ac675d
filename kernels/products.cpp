#include "kernels/products.h"

#include <algorithm>
#include <array>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "kernels/trace.h"

namespace vt::kernels {
namespace {

void scaled(std::int64_t n, const float* x, float factor, float* out) {
  parallel_for(n, 16384, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) out[i] = x[i] * factor;
  });
}

std::array<trace::Param, 6> baddbmm_params(std::int64_t batch, std::int64_t M, std::int64_t N,
                                           std::int64_t K, float alpha, float beta) {
  return {trace::integer("batch", batch), trace::integer("m", M),      trace::integer("n", N),
          trace::integer("k", K),         trace::real("alpha", alpha), trace::real("beta", beta)};
}

}  // namespace

void baddbmm(std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K, const float* a,
             const float* b, const float* c, float alpha, float beta, float* y) {
  const std::int64_t n = batch * M * N;
  // One call: its product is part of it, not a gemm call of its own.
  const auto params = baddbmm_params(batch, M, N, K, alpha, beta);
  trace::Call traced("baddbmm", params,
                     std::array{trace::f32("a", a, batch * M * K),
                                trace::f32("b", b, batch * K * N), trace::f32_or_none("c", c, n)});
  gemm(batch, M, N, K, {a, K, 1}, M * K, {b, N, 1}, K * N, y, N, M * N, /*accumulate=*/false);
  if (alpha != 1.0f) scaled(n, y, alpha, y);
  if (c != nullptr) {
    parallel_for(n, 16384, [=](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) y[i] = y[i] + (beta == 1.0f ? c[i] : beta * c[i]);
    });
  }
  traced.outputs({trace::f32("y", y, n)});
}

void baddbmm_backward(std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K,
                      const float* a, const float* b, const float* dy, float alpha, float beta,
                      float* da, float* db, float* dc) {
  const std::int64_t n = batch * M * N;
  const auto params = baddbmm_params(batch, M, N, K, alpha, beta);
  trace::Call traced("baddbmm_backward", params,
                     std::array{trace::f32("a", a, batch * M * K),
                                trace::f32("b", b, batch * K * N), trace::f32("dy", dy, n)});
  std::vector<float> scaled_dy;
  const float* g = dy;
  if (alpha != 1.0f && (da != nullptr || db != nullptr)) {
    scaled_dy.resize(static_cast<std::size_t>(n));
    scaled(n, dy, alpha, scaled_dy.data());
    g = scaled_dy.data();
  }
  if (da != nullptr) gemm(batch, M, K, N, {g, N, 1}, M * N, {b, 1, N}, K * N, da, K, M * K, false);
  if (db != nullptr) gemm(batch, K, N, M, {a, 1, K}, M * K, {g, N, 1}, M * N, db, N, K * N, false);
  if (dc != nullptr) {
    if (beta == 1.0f) {
      std::copy(dy, dy + n, dc);
    } else {
      scaled(n, dy, beta, dc);
    }
  }
  traced.outputs({trace::f32_or_none("da", da, batch * M * K),
                  trace::f32_or_none("db", db, batch * K * N), trace::f32_or_none("dc", dc, n)});
}

}  // namespace vt::kernels
