#include "kernels/clip.h"

#include <cmath>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/trace.h"

namespace vt::kernels {
namespace {

constexpr int kLanes = 16;

// The lane sum of f(x[i]) over n values: lane i mod 16, each a chain from +0.0, then the lanes
// summed pairwise, (0 ⊕ 1), (2 ⊕ 3), ..., down to one. The lanes' chains advance side by side, so
// the loop vectorises at any width with the same bits.
template <typename F>
float lane_sum(std::int64_t n, const float* x, F f) {
  float lanes[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = lanes[l] + f(x[i + l]);
  }
  for (int l = 0; i + l < n; ++l) lanes[l] = lanes[l] + f(x[i + l]);
  for (std::ptrdiff_t width = kLanes / 2; width >= 1; width /= 2) {
    for (std::ptrdiff_t l = 0; l < width; ++l) lanes[l] = lanes[2 * l] + lanes[2 * l + 1];
  }
  return lanes[0];
}

float square(float v) { return v * v; }
float identity(float v) { return v; }

// NaN wins; otherwise the larger, +0.0 over −0.0 (|x| is never −0.0).
float larger(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::nanf("");
  return b > a ? b : a;
}

}  // namespace

float sum_of_squares(std::int64_t n, const float* x) {
  trace::Call traced("sum_of_squares", {trace::integer("n", n)}, {trace::f32("x", x, n)});
  const std::int64_t chunks = (n + kClipChunk - 1) / kClipChunk;
  std::vector<float> sums(static_cast<std::size_t>(chunks));
  parallel_for(chunks, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const std::int64_t from = c * kClipChunk;
      sums[static_cast<std::size_t>(c)] =
          lane_sum(std::min(kClipChunk, n - from), x + from, square);
    }
  });
  const float total = lane_sum(chunks, sums.data(), identity);
  traced.outputs({trace::f32("sum", &total, 1)});
  return total;
}

float abs_max(std::int64_t n, const float* x) {
  trace::Call traced("abs_max", {trace::integer("n", n)}, {trace::f32("x", x, n)});
  // A maximum rounds nothing: any order gives the same value.
  float most = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) most = larger(most, std::fabs(x[i]));
  traced.outputs({trace::f32("max", &most, 1)});
  return most;
}

float clip_coefficient(std::int64_t count, const float* parts, float max_norm, bool inf) {
  trace::Call traced("clip_coefficient",
                     {trace::integer("count", count), trace::real("max_norm", max_norm),
                      trace::integer("inf", inf)},
                     {trace::f32("parts", parts, count)});
  float norm = 0.0f;
  if (inf) {
    for (std::int64_t i = 0; i < count; ++i) norm = larger(norm, parts[i]);
  } else {
    norm = std::sqrt(lane_sum(count, parts, identity));  // sqrt is correctly rounded
  }
  float c = max_norm / (norm + 1e-6f);
  if (!std::isnan(c) && c > 1.0f) c = 1.0f;
  traced.outputs({trace::f32("coefficient", &c, 1)});
  return c;
}

void scale_gradient(std::int64_t n, float* x, float c) {
  trace::Call traced("scale_gradient", {trace::integer("n", n), trace::real("c", c)},
                     {trace::f32("x", x, n)});
  if (c != 1.0f) {
    parallel_for(n, 1 << 15, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) x[i] = x[i] * c;
    });
  }
  traced.outputs({trace::f32("x", x, n)});
}

}  // namespace vt::kernels
