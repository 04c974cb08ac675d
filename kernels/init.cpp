#include "kernels/init.h"

#include <cmath>

#include "kernels/parallel.h"
#include "kernels/scalar.h"

namespace vt::kernels {
namespace {
constexpr std::int64_t kGrain = 16384;
}

void init_uniform_fan_in(std::int64_t n, std::uint64_t state, std::int64_t fan_in, float* out) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  parallel_for(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t j = begin; j < end; ++j) {
      const float u = uniform_of(stream_at(state, static_cast<std::uint64_t>(j)));
      out[j] = (u * 2.0f - 1.0f) * bound;
    }
  });
}

void init_normal(std::int64_t n, std::uint64_t state, float* out) {
  parallel_for(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t j = begin; j < end; ++j) {
      const auto first = static_cast<std::uint64_t>(4 * j);
      const float u1 = uniform_of(stream_at(state, first));
      const float u2 = uniform_of(stream_at(state, first + 1));
      const float u3 = uniform_of(stream_at(state, first + 2));
      const float u4 = uniform_of(stream_at(state, first + 3));
      out[j] = ((((u1 + u2) + u3) + u4) - 2.0f) * 1.7320508f;
    }
  });
}

void fill(std::int64_t n, float value, float* out) {
  parallel_for(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t j = begin; j < end; ++j) out[j] = value;
  });
}

}  // namespace vt::kernels
