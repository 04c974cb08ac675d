#pragma once
// What the kernel tests share: seeded inputs and equality of bits.

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace vt::kernels {

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  // memcmp of two empty vectors' (null) data would be undefined even for no bytes.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace vt::kernels
