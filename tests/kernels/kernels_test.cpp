// The portable kernels against the definitions of docs/portable.md, written out naively here:
// equal bits, not closeness, at shapes that cross every tile and block edge.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "kernels/norm.h"
#include "kernels/parallel.h"
#include "kernels/pointwise.h"
#include "kernels/scalar.h"
#include "tests/kernels/kernel_test_util.h"

namespace vt::kernels {
namespace {

// ctest runs these tests again under each VT_KERNELS_ISA (tests/kernels/CMakeLists.txt): the cap
// must be the path the kernels take, or those runs would only repeat the widest one.
TEST(Isa, TheCapInTheEnvironmentIsThePathTaken) {
  const char* cap = std::getenv("VT_KERNELS_ISA");
  if (cap == nullptr) GTEST_SKIP() << "VT_KERNELS_ISA not set: the widest path the CPU has";
  const std::string wanted(cap);
  const std::string taken = isa_name(isa());
  if (wanted == "scalar") {
    EXPECT_EQ(taken, "scalar");
  } else if (wanted == "generic") {
    EXPECT_TRUE(taken == "generic" || taken == "scalar") << taken;
  } else if (wanted == "avx2") {
    EXPECT_NE(taken, "avx512");
  }
}

// a·b + c rounded once: the step of a product's chain (docs/portable.md, "Matrix products").
float fused(float a, float b, float c) { return std::fma(a, b, c); }

// docs/portable.md, "Matrix products": one chain per output, k ascending.
std::vector<float> naive_product(std::int64_t m, std::int64_t n, std::int64_t k, MatrixRef a,
                                 MatrixRef b, const std::vector<float>* start = nullptr) {
  std::vector<float> c(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      float s = start ? (*start)[static_cast<std::size_t>(i * n + j)] : 0.0f;
      for (std::int64_t q = 0; q < k; ++q) {
        s = fused(a.data[i * a.row_stride + q * a.col_stride],
                  b.data[q * b.row_stride + j * b.col_stride], s);
      }
      c[static_cast<std::size_t>(i * n + j)] = s;
    }
  }
  return c;
}

TEST(Gemm, EveryOutputIsOneChainOverKAtAnyShapeStrideAndThreadCount) {
  // With threads, a product of few cache blocks is cut into finer ones (a layer's weight
  // gradient, 64 × 64 over 512 tokens): the chains must not notice.
  const std::int64_t shapes[][3] = {{1, 1, 1},      {7, 5, 3},    {33, 17, 300}, {97, 260, 9},
                                    {130, 33, 513}, {8, 32, 256}, {64, 64, 512}};
  for (int threads : {1, 2, 3, 8}) {
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
  // m = 100: several blocks of rows, so that a B read through its strides is packed whole.
  for (const std::int64_t m : {9, 100}) {
    const std::int64_t batch = 5, n = 11, k = 13;
    const auto a = random_floats(static_cast<std::size_t>(batch * m * k), 3);
    const auto b = random_floats(static_cast<std::size_t>(batch * k * n), 4);
    for (const bool transposed : {false, true}) {
      const MatrixRef br = transposed ? MatrixRef{b.data(), 1, k} : MatrixRef{b.data(), n, 1};
      std::vector<float> c(static_cast<std::size_t>(batch * m * n));
      gemm(batch, m, n, k, {a.data(), k, 1}, m * k, br, k * n, c.data(), n, m * n, false);
      for (std::int64_t i = 0; i < batch; ++i) {
        MatrixRef bi = br;
        bi.data += i * k * n;
        const auto one = naive_product(m, n, k, {a.data() + i * m * k, k, 1}, bi);
        EXPECT_TRUE(
            same_bits(std::vector<float>(c.begin() + i * m * n, c.begin() + (i + 1) * m * n), one))
            << "problem " << i << " of " << m << " rows" << (transposed ? ", B transposed" : "");
      }
    }
  }
}

// Attention's layout: 2 examples of 3 heads, each head's A and B d = 5 columns of a row of
// [q | k | v] (width 3·15), C each head's 5 columns of a 15-wide row; kᵀ read with col_stride.
TEST(Gemm, GroupedBatchesReadAndWriteHeadsWhereTheyLie) {
  const std::int64_t examples = 2, heads = 3, t = 7, d = 5, model = heads * d;
  const auto qkv = random_floats(static_cast<std::size_t>(examples * t * 3 * model), 6);
  const BatchStride in{d, heads, t * 3 * model}, out{d, heads, t * model};
  std::vector<float> scores(static_cast<std::size_t>(examples * heads * t * t));
  std::vector<float> c(static_cast<std::size_t>(examples * t * model));
  for (const int threads : {1, 2}) {
    set_threads(threads);
    gemm(examples * heads, t, t, d, {qkv.data(), 3 * model, 1}, in,
         {qkv.data() + model, 1, 3 * model}, in, scores.data(), t, t * t, false);
    gemm(examples * heads, t, d, t, {scores.data(), t, 1}, t * t,
         {qkv.data() + 2 * model, 3 * model, 1}, in, c.data(), model, out, false);
    for (std::int64_t e = 0; e < examples; ++e) {
      for (std::int64_t h = 0; h < heads; ++h) {
        const float* q = qkv.data() + e * t * 3 * model + h * d;
        const auto s = naive_product(t, t, d, {q, 3 * model, 1}, {q + model, 1, 3 * model});
        const std::size_t at = static_cast<std::size_t>((e * heads + h) * t * t);
        EXPECT_TRUE(
            same_bits(std::vector<float>(scores.begin() + at, scores.begin() + at + t * t), s))
            << "scores of example " << e << ", head " << h;
        const auto o = naive_product(t, d, t, {s.data(), t, 1}, {q + 2 * model, 3 * model, 1});
        for (std::int64_t i = 0; i < t; ++i) {
          const float* row = c.data() + e * t * model + i * model + h * d;
          EXPECT_TRUE(same_bits(std::vector<float>(row, row + d),
                                std::vector<float>(o.begin() + i * d, o.begin() + (i + 1) * d)))
              << "output row " << i << " of example " << e << ", head " << h;
        }
      }
    }
  }
  set_threads(1);
}

TEST(Gemm, ColumnSumsChainOverTheRows) {
  // 1100 rows: enough sums for threads to split the 70 columns (in runs of 16).
  for (const std::int64_t rows : {301, 1100}) {
    const std::int64_t cols = 70;
    const auto x = random_floats(static_cast<std::size_t>(rows * cols), 5);
    for (const int threads : {1, 2, 3}) {
      set_threads(threads);
      std::vector<float> got(static_cast<std::size_t>(cols));
      column_sums(rows, cols, x.data(), cols, got.data());
      for (std::int64_t j = 0; j < cols; ++j) {
        volatile float s = 0.0f;
        for (std::int64_t i = 0; i < rows; ++i) s = s + x[static_cast<std::size_t>(i * cols + j)];
        EXPECT_EQ(got[static_cast<std::size_t>(j)], s)
            << "column " << j << " of " << rows << " rows, " << threads << " threads";
      }
    }
  }
  set_threads(1);
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
          float acc = 0.0f;
          for (std::int64_t c = 0; c < s.in_channels; ++c) {
            for (std::int64_t u = 0; u < 3; ++u) {
              for (std::int64_t v = 0; v < 3; ++v) {
                const std::int64_t h = i * 2 + u - 1, ww = j * 2 + v - 1;
                const float in = h >= 0 && h < 7 && ww >= 0 && ww < 6
                                     ? x[static_cast<std::size_t>(((b * 3 + c) * 7 + h) * 6 + ww)]
                                     : 0.0f;
                acc = fused(w[static_cast<std::size_t>(o * 27 + (c * 3 + u) * 3 + v)], in, acc);
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

// conv.h's definitions written out one value at a time: x[b, c, ·] at the column matrix's
// entry (q, p), or +0.0 in the padding.
float column_entry(const ConvShape& s, const std::vector<float>& x, std::int64_t b, std::int64_t q,
                   std::int64_t p) {
  const std::int64_t v = q % s.kernel[2], u = q / s.kernel[2] % s.kernel[1];
  const std::int64_t t = q / (s.kernel[2] * s.kernel[1]) % s.kernel[0], c = q / s.taps();
  const std::int64_t j = p % s.out(2), i = p / s.out(2) % s.out(1), z = p / (s.out(2) * s.out(1));
  const std::int64_t zz = z * s.stride[0] + t - s.padding[0];
  const std::int64_t ii = i * s.stride[1] + u - s.padding[1];
  const std::int64_t jj = j * s.stride[2] + v - s.padding[2];
  if (zz < 0 || zz >= s.in[0] || ii < 0 || ii >= s.in[1] || jj < 0 || jj >= s.in[2]) return 0.0f;
  return x[static_cast<std::size_t>((b * s.in_channels + c) * s.in_positions() +
                                    (zz * s.in[1] + ii) * s.in[2] + jj)];
}

TEST(Conv, AnyStrideAndThreeDimensionsForwardAndBackwardAreTheDocumentedChains) {
  ConvShape shapes[5];
  shapes[0].batch = 3, shapes[0].in_channels = 5, shapes[0].out_channels = 17;  // 2-d, pad 1
  shapes[0].in[1] = 9, shapes[0].in[2] = 37;
  shapes[0].kernel[1] = shapes[0].kernel[2] = 3;
  shapes[0].padding[1] = shapes[0].padding[2] = 1;
  shapes[1].batch = 2, shapes[1].in_channels = 2, shapes[1].out_channels = 3;  // 3-d, pad 1
  shapes[1].in[0] = 5, shapes[1].in[1] = 6, shapes[1].in[2] = 7;
  shapes[1].kernel[0] = shapes[1].kernel[1] = shapes[1].kernel[2] = 3;
  shapes[1].padding[0] = shapes[1].padding[1] = shapes[1].padding[2] = 1;
  shapes[2].batch = 2, shapes[2].in_channels = 4, shapes[2].out_channels = 32;  // 1×1, stride 2
  shapes[2].in[1] = 8, shapes[2].in[2] = 8;
  shapes[2].stride[1] = shapes[2].stride[2] = 2;
  shapes[3].batch = 2, shapes[3].in_channels = 3, shapes[3].out_channels = 5;  // 3×3, stride 2
  shapes[3].in[1] = 7, shapes[3].in[2] = 9;
  shapes[3].kernel[1] = shapes[3].kernel[2] = 3;
  shapes[3].stride[1] = shapes[3].stride[2] = 2;
  shapes[3].padding[1] = shapes[3].padding[2] = 1;
  shapes[4].batch = 2, shapes[4].in_channels = 2, shapes[4].out_channels = 3;  // 3-d, mixed
  shapes[4].in[0] = 5, shapes[4].in[1] = 4, shapes[4].in[2] = 7;
  shapes[4].kernel[0] = shapes[4].kernel[1] = shapes[4].kernel[2] = 3;
  shapes[4].stride[0] = 2, shapes[4].stride[2] = 2;
  shapes[4].padding[0] = shapes[4].padding[1] = 1;
  for (int threads : {1, 3}) {
    set_threads(threads);
    for (const ConvShape& s : shapes) {
      const std::int64_t positions = s.out_positions(), rows = s.rows();
      const auto x =
          random_floats(static_cast<std::size_t>(s.batch * s.in_channels * s.in_positions()), 11);
      const auto w = random_floats(static_cast<std::size_t>(s.out_channels * rows), 12);
      const auto bias = random_floats(static_cast<std::size_t>(s.out_channels), 13);
      const auto dy =
          random_floats(static_cast<std::size_t>(s.batch * s.out_channels * positions), 14);
      std::vector<float> y(dy.size()), dx(x.size()), dw(w.size()), dbias(bias.size());
      conv_forward(s, x.data(), w.data(), bias.data(), y.data());
      conv_backward(s, x.data(), w.data(), dy.data(), dx.data(), dw.data(), dbias.data());
      std::vector<float> want_y(y.size()), want_dw(w.size(), 0.0f), want_dx(x.size(), 0.0f);
      for (std::int64_t b = 0; b < s.batch; ++b) {
        for (std::int64_t o = 0; o < s.out_channels; ++o) {
          for (std::int64_t p = 0; p < positions; ++p) {
            float acc = 0.0f;
            for (std::int64_t q = 0; q < rows; ++q) {
              acc = fused(w[static_cast<std::size_t>(o * rows + q)], column_entry(s, x, b, q, p),
                          acc);
            }
            want_y[static_cast<std::size_t>((b * s.out_channels + o) * positions + p)] =
                acc + bias[static_cast<std::size_t>(o)];
          }
        }
      }
      for (std::int64_t o = 0; o < s.out_channels; ++o) {
        for (std::int64_t q = 0; q < rows; ++q) {
          float acc = 0.0f;
          for (std::int64_t b = 0; b < s.batch; ++b) {
            for (std::int64_t p = 0; p < positions; ++p) {
              acc = fused(dy[static_cast<std::size_t>((b * s.out_channels + o) * positions + p)],
                          column_entry(s, x, b, q, p), acc);
            }
          }
          want_dw[static_cast<std::size_t>(o * rows + q)] = acc;
        }
      }
      // dx at stride 1: the convolution of dy by the transposed, flipped weights (padding
      // k − 1 − p), one chain over (o, t, u, v).
      const bool transposed = s.stride[0] == 1 && s.stride[1] == 1 && s.stride[2] == 1;
      for (std::int64_t b = 0; transposed && b < s.batch; ++b) {
        for (std::int64_t c = 0; c < s.in_channels; ++c) {
          for (std::int64_t pos = 0; pos < s.in_positions(); ++pos) {
            const std::int64_t jj = pos % s.in[2], ii = pos / s.in[2] % s.in[1];
            const std::int64_t zz = pos / (s.in[2] * s.in[1]);
            float acc = 0.0f;
            for (std::int64_t o = 0; o < s.out_channels; ++o) {
              for (std::int64_t tap = 0; tap < s.taps(); ++tap) {
                const std::int64_t v = tap % s.kernel[2], u = tap / s.kernel[2] % s.kernel[1];
                const std::int64_t t = tap / (s.kernel[2] * s.kernel[1]);
                const std::int64_t z = zz + t - (s.kernel[0] - 1 - s.padding[0]);
                const std::int64_t i = ii + u - (s.kernel[1] - 1 - s.padding[1]);
                const std::int64_t j = jj + v - (s.kernel[2] - 1 - s.padding[2]);
                const bool inside =
                    z >= 0 && z < s.out(0) && i >= 0 && i < s.out(1) && j >= 0 && j < s.out(2);
                const float g =
                    inside ? dy[static_cast<std::size_t>((b * s.out_channels + o) * positions +
                                                         (z * s.out(1) + i) * s.out(2) + j)]
                           : 0.0f;
                acc = fused(w[static_cast<std::size_t>((o * s.in_channels + c) * s.taps() +
                                                       s.taps() - 1 - tap)],
                            g, acc);
              }
            }
            want_dx[static_cast<std::size_t>((b * s.in_channels + c) * s.in_positions() + pos)] =
                acc;
          }
        }
      }
      // dx otherwise: dcol (a chain over o), then added tap by tap into the position it read.
      for (std::int64_t b = 0; !transposed && b < s.batch; ++b) {
        for (std::int64_t c = 0; c < s.in_channels; ++c) {
          for (std::int64_t tap = 0; tap < s.taps(); ++tap) {
            const std::int64_t q = c * s.taps() + tap;
            for (std::int64_t p = 0; p < positions; ++p) {
              float dcol = 0.0f;
              for (std::int64_t o = 0; o < s.out_channels; ++o) {
                dcol = fused(w[static_cast<std::size_t>(o * rows + q)],
                             dy[static_cast<std::size_t>((b * s.out_channels + o) * positions + p)],
                             dcol);
              }
              // Which input position column entry (q, p) reads, if any: perturb-free lookup.
              const std::int64_t v = q % s.kernel[2], u = q / s.kernel[2] % s.kernel[1];
              const std::int64_t t = q / (s.kernel[2] * s.kernel[1]) % s.kernel[0];
              const std::int64_t j = p % s.out(2), i = p / s.out(2) % s.out(1);
              const std::int64_t z = p / (s.out(2) * s.out(1));
              const std::int64_t zz = z * s.stride[0] + t - s.padding[0];
              const std::int64_t ii = i * s.stride[1] + u - s.padding[1];
              const std::int64_t jj = j * s.stride[2] + v - s.padding[2];
              if (zz < 0 || zz >= s.in[0] || ii < 0 || ii >= s.in[1] || jj < 0 || jj >= s.in[2])
                continue;
              float& to = want_dx[static_cast<std::size_t>(
                  (b * s.in_channels + c) * s.in_positions() + (zz * s.in[1] + ii) * s.in[2] + jj)];
              to = to + dcol;
            }
          }
        }
      }
      const std::string where = std::to_string(s.in[0]) + "x" + std::to_string(s.in[1]) + "x" +
                                std::to_string(s.in[2]) + ", " + std::to_string(threads) +
                                " threads";
      EXPECT_TRUE(same_bits(y, want_y)) << "forward " << where;
      EXPECT_TRUE(same_bits(dw, want_dw)) << "dw " << where;
      EXPECT_TRUE(same_bits(dx, want_dx)) << "dx " << where;
    }
  }
  set_threads(1);
}

// docs/portable.md, "BatchNorm2d, training": 16 lanes by index mod 16, each a chain, then the
// lanes summed pairwise.
float lane_sum(const std::vector<float>& values) {
  float lanes[16] = {};
  for (std::size_t n = 0; n < values.size(); ++n) {
    volatile float sum = lanes[n % 16] + values[n];
    lanes[n % 16] = sum;
  }
  for (std::size_t width = 8; width >= 1; width /= 2) {
    for (std::size_t l = 0; l < width; ++l) lanes[l] = lanes[2 * l] + lanes[2 * l + 1];
  }
  return lanes[0];
}

TEST(BatchNorm, SumsRunInSixteenLanesSummedPairwiseAtAnySpatialSize) {
  for (const BatchNormShape s : {BatchNormShape{3, 10, 35}, BatchNormShape{2, 3, 256},
                                 BatchNormShape{5, 17, 1}, BatchNormShape{4, 9, 20}}) {
    const std::size_t size = static_cast<std::size_t>(s.batch * s.channels * s.spatial);
    const auto x = random_floats(size, 21), dy = random_floats(size, 22);
    const auto weight = random_floats(static_cast<std::size_t>(s.channels), 23);
    const auto bias = random_floats(static_cast<std::size_t>(s.channels), 24);
    std::vector<float> y(size), dx(size), mean(weight.size()), invstd(weight.size());
    std::vector<float> dweight(weight.size()), dbias(weight.size());
    std::vector<float> running_mean(weight.size(), 0.0f), running_var(weight.size(), 1.0f);
    for (int threads : {1, 3}) {
      set_threads(threads);
      batch_norm_train(s, x.data(), weight.data(), bias.data(), 1e-5f, 0.1f, running_mean.data(),
                       running_var.data(), y.data(), mean.data(), invstd.data());
      batch_norm_backward(s, x.data(), weight.data(), mean.data(), invstd.data(), dy.data(),
                          dx.data(), dweight.data(), dbias.data());
      const float count = static_cast<float>(s.batch * s.spatial);
      for (std::int64_t c = 0; c < s.channels; ++c) {
        std::vector<float> v, g;
        for (std::int64_t b = 0; b < s.batch; ++b) {
          for (std::int64_t p = 0; p < s.spatial; ++p) {
            v.push_back(x[static_cast<std::size_t>((b * s.channels + c) * s.spatial + p)]);
            g.push_back(dy[static_cast<std::size_t>((b * s.channels + c) * s.spatial + p)]);
          }
        }
        const float m = lane_sum(v) / count;
        std::vector<float> squares, dy_xhat;
        for (float value : v) squares.push_back((value - m) * (value - m));
        const float inv = 1.0f / std::sqrt(lane_sum(squares) / count + 1e-5f);
        for (std::size_t n = 0; n < v.size(); ++n) dy_xhat.push_back(g[n] * ((v[n] - m) * inv));
        const std::string where = std::to_string(s.spatial) + " positions, channel " +
                                  std::to_string(c) + ", " + std::to_string(threads) + " threads";
        EXPECT_EQ(mean[static_cast<std::size_t>(c)], m) << where;
        EXPECT_EQ(invstd[static_cast<std::size_t>(c)], inv) << where;
        EXPECT_EQ(dbias[static_cast<std::size_t>(c)], lane_sum(g)) << where;
        EXPECT_EQ(dweight[static_cast<std::size_t>(c)], lane_sum(dy_xhat)) << where;
      }
    }
  }
  set_threads(1);
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

// torch.randn's draws (docs/portable.md, "Random operators"): a standard normal, not an
// approximation of one: its moments and its mass within one and two deviations, a tail out to
// sqrt(2 ln 2^24), and the same bits at any thread count (the bits against the docs:
// tests/kernels/ops_ref_test.py).
TEST(Scalar, NormalDrawsAreStandardNormalsAtAnyThreadCount) {
  constexpr std::int64_t kCount = 1 << 18;
  const std::uint64_t state = stream_state(42, 5, 0);
  std::vector<float> one(kCount), two(kCount);
  set_threads(1);
  normal(kCount, state, 3, one.data());
  set_threads(2);
  normal(kCount, state, 3, two.data());
  set_threads(1);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
  double sum = 0, squares = 0, fourths = 0, within1 = 0, within2 = 0, widest = 0;
  for (const float z : one) {
    sum += z;
    squares += double{z} * z;
    fourths += double{z} * z * z * z;
    within1 += std::abs(z) <= 1.0f ? 1 : 0;
    within2 += std::abs(z) <= 2.0f ? 1 : 0;
    widest = std::max(widest, double{std::abs(z)});
  }
  const double n = kCount;
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(squares / n, 1.0, 0.01);
  EXPECT_NEAR(fourths / n, 3.0, 0.06);  // the normal's kurtosis: sums of uniforms fall short
  EXPECT_NEAR(within1 / n, 0.682689, 0.003);
  EXPECT_NEAR(within2 / n, 0.954500, 0.002);
  EXPECT_GT(widest, 3.9);  // 1 in 10^4 lies beyond 3.9
  EXPECT_LE(widest, std::sqrt(2 * 24 * std::log(2.0)) + 1e-4);
  // Another call is another stream.
  normal(kCount, state, 4, two.data());
  EXPECT_NE(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

// torch.randint's draws: every value of a small range about equally often, a range wider than
// INT64_MAX without overflow, the same integers at any thread count.
TEST(Scalar, RandintDrawsCoverTheirRangeAtAnyThreadCount) {
  constexpr std::int64_t kCount = 1 << 17;
  const std::uint64_t state = stream_state(42, 5, 0);
  std::vector<std::int64_t> one(kCount), two(kCount);
  set_threads(1);
  randint(kCount, -3, 4, state, 2, one.data());
  set_threads(2);
  randint(kCount, -3, 4, state, 2, two.data());
  set_threads(1);
  EXPECT_EQ(one, two);
  std::vector<std::int64_t> seen(7, 0);
  for (const std::int64_t v : one) {
    ASSERT_GE(v, -3);
    ASSERT_LT(v, 4);
    ++seen[static_cast<std::size_t>(v + 3)];
  }
  for (const std::int64_t n : seen) EXPECT_NEAR(static_cast<double>(n), kCount / 7.0, 700.0);
  const std::int64_t low = std::numeric_limits<std::int64_t>::min() + 5;
  const std::int64_t high = std::numeric_limits<std::int64_t>::max() - 5;
  randint(kCount, low, high, state, 3, one.data());
  std::int64_t negative = 0;
  for (const std::int64_t v : one) {
    ASSERT_GE(v, low);
    ASSERT_LT(v, high);
    negative += v < 0 ? 1 : 0;
  }
  EXPECT_NEAR(static_cast<double>(negative), kCount / 2.0, 1000.0);
}

}  // namespace
}  // namespace vt::kernels
