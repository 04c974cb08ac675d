// Gradient clipping's sums against docs/portable.md ("Gradient clipping") written out the slow
// way, at 1 to 3 threads, and the coefficient's edges: the clamp at 1, a zero norm, NaN and inf.
#include "kernels/clip.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/parallel.h"
#include "tests/kernels/kernel_test_util.h"

namespace vt::kernels {
namespace {

// The documented lane sum, one value at a time: value i to lane i mod 16, lanes pairwise.
float documented_lane_sum(const std::vector<float>& values) {
  std::vector<float> lanes(16, 0.0f);
  for (std::size_t i = 0; i < values.size(); ++i) lanes[i % 16] = lanes[i % 16] + values[i];
  for (std::size_t width = 8; width >= 1; width /= 2) {
    for (std::size_t l = 0; l < width; ++l) lanes[l] = lanes[2 * l] + lanes[2 * l + 1];
  }
  return lanes[0];
}

float documented_sum_of_squares(const std::vector<float>& x) {
  std::vector<float> chunk_sums;
  for (std::size_t from = 0; from < x.size(); from += kClipChunk) {
    std::vector<float> squares;
    for (std::size_t i = from; i < std::min(x.size(), from + kClipChunk); ++i)
      squares.push_back(x[i] * x[i]);
    chunk_sums.push_back(documented_lane_sum(squares));
  }
  return documented_lane_sum(chunk_sums);
}

std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

TEST(Clip, SumOfSquaresIsTheDocumentedOrderAtAnyThreadCount) {
  // Both sides of a chunk, a tail shorter than the lanes, and several chunks to split.
  for (const std::size_t n : {0u, 1u, 15u, 17u, 16384u, 16385u, 70001u}) {
    const std::vector<float> x = random_floats(n, static_cast<std::uint32_t>(n) + 7);
    const float expected = documented_sum_of_squares(x);
    for (const int threads : {1, 2, 3}) {
      set_threads(threads);
      EXPECT_EQ(bits(sum_of_squares(std::ssize(x), x.data())), bits(expected))
          << n << " values, " << threads << " threads";
    }
  }
  set_threads(1);
}

TEST(Clip, SumOfSquaresIsNotASequentialSum) {
  // 1e4 squared and fifteen ones: a running sum loses every 1 against 1e8 (its ulp is 8), the
  // lanes add the ones among themselves first and keep 8 of them. Equality above pins the order.
  std::vector<float> x(16, 1.0f);
  x[0] = 1e4f;
  float running = 0.0f;
  for (float v : x) running = running + v * v;
  EXPECT_EQ(running, 1e8f);
  EXPECT_EQ(sum_of_squares(std::ssize(x), x.data()), 1e8f + 8.0f);
}

TEST(Clip, AbsMaxTakesNaNAndIgnoresSign) {
  std::vector<float> x = {-3.0f, 2.0f, -0.0f};
  EXPECT_EQ(abs_max(3, x.data()), 3.0f);
  EXPECT_EQ(bits(abs_max(0, x.data())), bits(0.0f));
  x.push_back(std::nanf(""));
  x.push_back(5.0f);
  EXPECT_TRUE(std::isnan(abs_max(std::ssize(x), x.data())));
}

TEST(Clip, CoefficientIsClampedAtOneAndFollowsTheFormula) {
  const std::vector<float> parts = {9.0f, 16.0f};  // l2 norm 5
  EXPECT_EQ(clip_coefficient(2, parts.data(), 10.0f, false), 1.0f);
  EXPECT_EQ(bits(clip_coefficient(2, parts.data(), 1.0f, false)), bits(1.0f / (5.0f + 1e-6f)));
  EXPECT_EQ(bits(clip_coefficient(2, parts.data(), 1.0f, true)), bits(1.0f / (16.0f + 1e-6f)));
  // No gradient at all: the norm is 0 and the coefficient max_norm / 1e-6, clamped to 1.
  EXPECT_EQ(clip_coefficient(0, parts.data(), 1.0f, false), 1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> infinite = {inf, 1.0f};
  EXPECT_EQ(bits(clip_coefficient(2, infinite.data(), 1.0f, false)), bits(0.0f));
  const std::vector<float> nan = {std::nanf(""), 1.0f};
  EXPECT_TRUE(std::isnan(clip_coefficient(2, nan.data(), 1.0f, false)));
  EXPECT_TRUE(std::isnan(clip_coefficient(2, nan.data(), 1.0f, true)));
}

TEST(Clip, ScaleGradientMultipliesEachValueAtAnyThreadCount) {
  const std::vector<float> x = random_floats(100000, 11);
  std::vector<float> expected = x;
  for (float& v : expected) v = v * 0.37f;
  for (const int threads : {1, 2, 3}) {
    set_threads(threads);
    std::vector<float> y = x;
    scale_gradient(std::ssize(y), y.data(), 0.37f);
    EXPECT_TRUE(same_bits(y, expected)) << threads << " threads";
  }
  set_threads(1);
  std::vector<float> y = x;
  scale_gradient(std::ssize(y), y.data(), 1.0f);
  EXPECT_TRUE(same_bits(y, x));
}

}  // namespace
}  // namespace vt::kernels
