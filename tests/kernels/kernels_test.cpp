// The portable kernels against the definitions of docs/portable.md, written out naively here:
// equal bits, not closeness, at shapes that cross every tile and block edge.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "kernels/scalar.h"

namespace vt::kernels {
namespace {

std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// docs/portable.md, "Matrix products": one chain per output, k ascending.
std::vector<float> naive_product(std::int64_t m, std::int64_t n, std::int64_t k, MatrixRef a,
                                 MatrixRef b, const std::vector<float>* start = nullptr) {
  std::vector<float> c(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      volatile float s = start ? (*start)[static_cast<std::size_t>(i * n + j)] : 0.0f;
      for (std::int64_t q = 0; q < k; ++q) {
        volatile float p = a.data[i * a.row_stride + q * a.col_stride] *
                           b.data[q * b.row_stride + j * b.col_stride];
        s = s + p;
      }
      c[static_cast<std::size_t>(i * n + j)] = s;
    }
  }
  return c;
}

TEST(Gemm, EveryOutputIsOneChainOverKAtAnyShapeStrideAndThreadCount) {
  const std::int64_t shapes[][3] = {{1, 1, 1},    {7, 5, 3},      {33, 17, 300},
                                    {97, 260, 9}, {130, 33, 513}, {8, 32, 256}};
  for (int threads : {1, 3}) {
    set_threads(threads);
    for (const auto& s : shapes) {
      const std::int64_t m = s[0], n = s[1], k = s[2];
      const auto a = random_floats(static_cast<std::size_t>(m * k), 1);
      const auto b = random_floats(static_cast<std::size_t>(k * n), 2);
      for (bool transposed : {false, true}) {
        // Transposed operands are read through their strides, as linear's backward does.
        MatrixRef ar = transposed ? MatrixRef{a.data(), 1, m} : MatrixRef{a.data(), k, 1};
        MatrixRef br = transposed ? MatrixRef{b.data(), 1, k} : MatrixRef{b.data(), n, 1};
        std::vector<float> c(static_cast<std::size_t>(m * n), -1.0f);
        gemm(m, n, k, ar, br, c.data(), n);
        EXPECT_TRUE(same_bits(c, naive_product(m, n, k, ar, br)))
            << m << "x" << n << "x" << k << (transposed ? " transposed" : "") << ", " << threads
            << " threads";
        // accumulate: the chain goes on from C's values.
        const std::vector<float> start = c;
        gemm(m, n, k, ar, br, c.data(), n, /*accumulate=*/true);
        EXPECT_TRUE(same_bits(c, naive_product(m, n, k, ar, br, &start)))
            << m << "x" << n << "x" << k << " accumulate";
      }
    }
  }
  set_threads(1);
}

TEST(Gemm, BatchedProductsAreIndependent) {
  const std::int64_t batch = 5, m = 9, n = 11, k = 13;
  const auto a = random_floats(static_cast<std::size_t>(batch * m * k), 3);
  const auto b = random_floats(static_cast<std::size_t>(batch * k * n), 4);
  std::vector<float> c(static_cast<std::size_t>(batch * m * n));
  gemm(batch, m, n, k, {a.data(), k, 1}, m * k, {b.data(), n, 1}, k * n, c.data(), n, m * n, false);
  for (std::int64_t i = 0; i < batch; ++i) {
    const auto one =
        naive_product(m, n, k, {a.data() + i * m * k, k, 1}, {b.data() + i * k * n, n, 1});
    EXPECT_TRUE(
        same_bits(std::vector<float>(c.begin() + i * m * n, c.begin() + (i + 1) * m * n), one))
        << "problem " << i;
  }
}

TEST(Gemm, ColumnSumsChainOverTheRows) {
  const std::int64_t rows = 301, cols = 70;
  const auto x = random_floats(static_cast<std::size_t>(rows * cols), 5);
  std::vector<float> got(static_cast<std::size_t>(cols));
  column_sums(rows, cols, x.data(), cols, got.data());
  for (std::int64_t j = 0; j < cols; ++j) {
    volatile float s = 0.0f;
    for (std::int64_t i = 0; i < rows; ++i) s = s + x[static_cast<std::size_t>(i * cols + j)];
    EXPECT_EQ(got[static_cast<std::size_t>(j)], s) << "column " << j;
  }
}

TEST(Conv, ForwardIsTheDocumentedChainOverChannelsAndTaps) {
  ConvShape s;
  s.batch = 2;
  s.in_channels = 3;
  s.out_channels = 4;
  s.in[1] = 7;
  s.in[2] = 6;
  s.kernel[1] = s.kernel[2] = 3;
  s.stride[1] = s.stride[2] = 2;
  s.padding[1] = s.padding[2] = 1;
  const auto x = random_floats(static_cast<std::size_t>(s.batch * s.in_channels * 42), 6);
  const auto w = random_floats(static_cast<std::size_t>(s.out_channels * s.rows()), 7);
  const auto bias = random_floats(static_cast<std::size_t>(s.out_channels), 8);
  const std::int64_t oh = s.out(1), ow = s.out(2);
  std::vector<float> y(static_cast<std::size_t>(s.batch * s.out_channels * oh * ow));
  conv_forward(s, x.data(), w.data(), bias.data(), y.data());
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t o = 0; o < s.out_channels; ++o) {
      for (std::int64_t i = 0; i < oh; ++i) {
        for (std::int64_t j = 0; j < ow; ++j) {
          volatile float acc = 0.0f;
          for (std::int64_t c = 0; c < s.in_channels; ++c) {
            for (std::int64_t u = 0; u < 3; ++u) {
              for (std::int64_t v = 0; v < 3; ++v) {
                const std::int64_t h = i * 2 + u - 1, ww = j * 2 + v - 1;
                const float in = h >= 0 && h < 7 && ww >= 0 && ww < 6
                                     ? x[static_cast<std::size_t>(((b * 3 + c) * 7 + h) * 6 + ww)]
                                     : 0.0f;
                volatile float p = w[static_cast<std::size_t>(o * 27 + (c * 3 + u) * 3 + v)] * in;
                acc = acc + p;
              }
            }
          }
          const float want = acc + bias[static_cast<std::size_t>(o)];
          EXPECT_EQ(y[static_cast<std::size_t>(((b * 4 + o) * oh + i) * ow + j)], want);
        }
      }
    }
  }
}

// Not correctly rounded, but close: what training needs from them.
TEST(Scalar, ExpLogAndErfAreAccurateAndHandleTheEdges) {
  double worst_exp = 0, worst_log = 0, worst_erf = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    worst_exp = std::max(worst_exp, std::abs(vt_exp(x) / std::exp(double{x}) - 1.0));
  }
  for (float x = 1e-30f; x < 1e30f; x *= 1.37f) {
    worst_log = std::max(worst_log, std::abs(vt_log(x) - std::log(double{x})) /
                                        std::max(1.0, std::abs(std::log(double{x}))));
  }
  for (float x = -6.0f; x < 6.0f; x += 0.001f)
    worst_erf = std::max(worst_erf, std::abs(vt_erf(x) - std::erf(double{x})));
  EXPECT_LT(worst_exp, 3e-7);
  EXPECT_LT(worst_log, 3e-7);
  EXPECT_LT(worst_erf, 6e-7);  // A&S's 1.5e-7 plus binary32 rounding
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(vt_exp(100.0f), inf);
  EXPECT_EQ(vt_exp(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(vt_exp(std::nanf(""))));
  // A subnormal result, not flushed, within a subnormal step or two of e^-100.
  EXPECT_GT(vt_exp(-100.0f), 0.0f);
  EXPECT_LE(std::abs(vt_exp(-100.0f) - std::exp(-100.0)), 3e-45);
  EXPECT_EQ(vt_log(0.0f), -inf);
  EXPECT_EQ(vt_log(inf), inf);
  EXPECT_TRUE(std::isnan(vt_log(-1.0f)));
  EXPECT_LT(std::abs(vt_log(1e-40f) - std::log(1e-40)), 1e-5);  // subnormal input
  EXPECT_EQ(vt_erf(-1.5f), -vt_erf(1.5f));
}

TEST(Scalar, StreamDrawsAreReadableAtAnyCounter) {
  const std::uint64_t state = stream_state(42, 5, 7);
  std::uint64_t s = state;
  for (std::uint64_t n = 0; n < 100; ++n) {
    s += 0x9e3779b97f4a7c15ull;  // Prng::next(), step by step
    EXPECT_EQ(stream_at(state, n), splitmix_mix(s)) << n;
  }
  EXPECT_EQ(uniform_of(0), 0.0f);
  EXPECT_LT(uniform_of(~std::uint64_t{0}), 1.0f);
}

}  // namespace
}  // namespace vt::kernels
