#pragma once
// The project's own PRNG for data order and synthetic data. std::shuffle and the std
// distributions are implementation-defined (libstdc++ and libc++ differ), and libm's
// transcendental functions may differ in the last bit between C libraries, so everything here
// is integer arithmetic plus IEEE-exact float operations: the same bits on every machine.

#include <cstdint>
#include <vector>

#include "kernels/stream.h"

namespace vt::training {

// SplitMix64 (Steele, Lea, Flood 2014; kernels/stream.h): tiny, full-period, well mixed; good
// enough for data order and synthetic data, which need reproducibility, not cryptographic
// strength.
class Prng {
 public:
  explicit Prng(std::uint64_t seed) : state_(seed) {}
  // A stream for (seed, a, b): independent streams per epoch, per pass, per purpose.
  Prng(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0)
      : state_(kernels::stream_state(seed, a, b)) {}

  std::uint64_t next() {
    state_ += kernels::kSplitMixGamma;
    return kernels::splitmix_mix(state_);
  }

  // Uniform in [0, bound) without modulo bias (Lemire's multiply-and-reject).
  std::uint64_t below(std::uint64_t bound) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * bound;
    auto low = static_cast<std::uint64_t>(m);
    if (low < bound) {
      const std::uint64_t threshold = -bound % bound;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * bound;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

  // Uniform in [0, 1) with 24 bits: exact in float.
  float uniform() { return kernels::uniform_of(next()); }

  // Approximately N(0, 1): the Irwin-Hall sum of four uniforms, rescaled. Only additions and
  // multiplications, so bit-identical everywhere, unlike Box-Muller's log and cos. The float
  // sum rounds, so its order is part of the data: u1..u4 are drawn in this order, one statement
  // each (the operands of one `+` chain may be evaluated in any order), and added left to right
  // (docs/training.md, "PRNG").
  float normal() {
    const float u1 = uniform();
    const float u2 = uniform();
    const float u3 = uniform();
    const float u4 = uniform();
    const float s = ((u1 + u2) + u3) + u4;
    return (s - 2.0f) * 1.7320508f;  // variance of the sum is 4/12
  }

  // A permutation of [0, n) by Fisher-Yates.
  std::vector<std::int64_t> permutation(std::int64_t n) {
    std::vector<std::int64_t> p(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = i;
    for (std::int64_t i = n - 1; i > 0; --i) {
      auto j = static_cast<std::int64_t>(below(static_cast<std::uint64_t>(i) + 1));
      std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(j)]);
    }
    return p;
  }

 private:
  std::uint64_t state_;
};

}  // namespace vt::training
