#pragma once
// The project's random numbers (docs/training.md, "PRNG"): SplitMix64 streams named by
// (seed, a, b), read in order by training/zoo/prng.h's Prng and at any counter by the portable
// kernels (kernels/scalar.h), so that threads, lanes and devices can split the draws. One
// definition for both: integer arithmetic and one exact float scaling, the same bits anywhere.

#include <cstdint>

#if !defined(VT_HD)
#if defined(__CUDACC__)
#define VT_HD __host__ __device__
#else
#define VT_HD
#endif
#endif

namespace vt::kernels {

// SplitMix64's increment (the golden ratio in 64 bits).
inline constexpr std::uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ull;

VT_HD inline std::uint64_t splitmix_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The state of the project's stream (seed, a, b): training/zoo/prng.h's Prng(seed, a, b).
VT_HD inline std::uint64_t stream_state(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  return splitmix_mix(splitmix_mix(seed ^ 0x657269747261696eull) ^ a) ^
         splitmix_mix(b + kSplitMixGamma);
}

// The stream's n-th draw (n from 0): what the (n+1)-th Prng::next() returns. Any draw is
// reachable without the ones before it, which is what lets threads, lanes and devices split
// the work.
VT_HD inline std::uint64_t stream_at(std::uint64_t state, std::uint64_t n) {
  return splitmix_mix(state + (n + 1) * kSplitMixGamma);
}

// Uniform in [0, 1) with 24 bits, exact in float: Prng::uniform() of that draw.
VT_HD inline float uniform_of(std::uint64_t draw) {
  return static_cast<float>(draw >> 40) * (1.0f / 16777216.0f);
}

}  // namespace vt::kernels
