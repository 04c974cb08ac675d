#pragma once
// Saturating size arithmetic for the zoo's rows and sizes.cpp: a size past 2^64 bytes is only
// ever compared against memory, so it stays at kAll instead of wrapping.

#include <cstdint>
#include <limits>

namespace vt::training::saturating {

inline constexpr std::uint64_t kAll = std::numeric_limits<std::uint64_t>::max();

inline std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kAll : r;
}
template <typename... Rest>
std::uint64_t mul(std::uint64_t a, std::uint64_t b, Rest... rest) {
  return mul(mul(a, b), rest...);
}
inline std::uint64_t add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? kAll : r;
}
inline std::uint64_t u(std::int64_t v) { return v < 0 ? 0 : static_cast<std::uint64_t>(v); }

}  // namespace vt::training::saturating
