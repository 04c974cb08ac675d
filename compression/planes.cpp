#include "compression/planes.h"

#include <bit>
#include <cstring>
#include <string>

namespace vt::comp {
namespace {

// Tensor bytes are little-endian (safetensors) and are loaded as native words.
static_assert(std::endian::native == std::endian::little,
              "planes.cpp assumes a little-endian host");

template <typename U>
U load(const std::uint8_t* p) {
  U v;
  std::memcpy(&v, p, sizeof(U));
  return v;
}

template <typename U>
void store(std::uint8_t* p, U v) {
  std::memcpy(p, &v, sizeof(U));
}

// Float words (sign, E exponent bits, mantissa) are rearranged to (exponent, sign, mantissa):
// the exponent fills the top byte(s) and the sign lands on top of the mantissa, so a tensor of
// one sign (second moments, norms near 1) leaves a constant bit in a plane that is coded anyway.
// kExp == 0 means an integer word, left as it is.
template <typename U, int kExp>
U to_planes_order(U x) {
  if constexpr (kExp == 0) {
    return x;
  } else {
    constexpr int kBits = 8 * sizeof(U);
    constexpr int kMant = kBits - 1 - kExp;
    constexpr U kMantMask = static_cast<U>((U{1} << kMant) - 1);
    U sign = static_cast<U>(x >> (kBits - 1));
    U exp = static_cast<U>((x >> kMant) & ((U{1} << kExp) - 1));
    return static_cast<U>((exp << (kMant + 1)) | (sign << kMant) | (x & kMantMask));
  }
}

template <typename U, int kExp>
U from_planes_order(U y) {
  if constexpr (kExp == 0) {
    return y;
  } else {
    constexpr int kBits = 8 * sizeof(U);
    constexpr int kMant = kBits - 1 - kExp;
    constexpr U kMantMask = static_cast<U>((U{1} << kMant) - 1);
    U sign = static_cast<U>((y >> kMant) & 1);
    U exp = static_cast<U>(y >> (kMant + 1));
    return static_cast<U>((sign << (kBits - 1)) | (exp << kMant) | (y & kMantMask));
  }
}

template <typename U, int kExp>
void split(const std::uint8_t* in, std::uint8_t* out, std::size_t n) {
  constexpr std::size_t kW = sizeof(U);
  for (std::size_t i = 0; i < n; ++i) {
    U v = to_planes_order<U, kExp>(load<U>(in + i * kW));
    for (std::size_t p = 0; p < kW; ++p) out[p * n + i] = static_cast<std::uint8_t>(v >> (8 * p));
  }
}

template <typename U, int kExp>
void merge(const std::uint8_t* in, std::uint8_t* out, std::size_t n) {
  constexpr std::size_t kW = sizeof(U);
  for (std::size_t i = 0; i < n; ++i) {
    U v = 0;
    for (std::size_t p = 0; p < kW; ++p)
      v |= static_cast<U>(static_cast<U>(in[p * n + i]) << (8 * p));
    store<U>(out + i * kW, from_planes_order<U, kExp>(v));
  }
}

template <typename U>
std::size_t delta(const std::uint8_t* after, const std::uint8_t* before, std::size_t n,
                  std::uint8_t* mask, std::uint8_t* diffs) {
  constexpr std::size_t kW = sizeof(U);
  constexpr int kTop = 8 * kW - 1;
  using S = std::make_signed_t<U>;
  std::memset(mask, 0, (n + 7) / 8);
  std::size_t changed = 0;
  for (std::size_t i = 0; i < n; ++i) {
    U a = load<U>(after + i * kW);
    U b = load<U>(before + i * kW);
    if (a == b) continue;
    mask[i >> 3] |= static_cast<std::uint8_t>(1u << (i & 7));
    U d = static_cast<U>(a - b);
    // Zigzag: small differences of either sign become small unsigned numbers.
    U z = static_cast<U>(static_cast<U>(d << 1) ^ static_cast<U>(static_cast<S>(d) >> kTop));
    for (std::size_t p = 0; p < kW; ++p)
      diffs[p * n + changed] = static_cast<std::uint8_t>(z >> (8 * p));
    ++changed;
  }
  // Planes were written at stride n; pack them at stride `changed`.
  for (std::size_t p = 1; p < kW; ++p) std::memmove(diffs + p * changed, diffs + p * n, changed);
  return changed;
}

template <typename U>
void undelta(const std::uint8_t* before, const std::uint8_t* mask, const std::uint8_t* diffs,
             std::size_t changed, std::size_t n, std::uint8_t* after) {
  constexpr std::size_t kW = sizeof(U);
  std::size_t k = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!(mask[i >> 3] & (1u << (i & 7)))) {
      std::memcpy(after + i * kW, before + i * kW, kW);
      continue;
    }
    U z = 0;
    for (std::size_t p = 0; p < kW; ++p)
      z |= static_cast<U>(static_cast<U>(diffs[p * changed + k]) << (8 * p));
    U d = static_cast<U>((z >> 1) ^ static_cast<U>(0 - (z & 1)));
    store<U>(after + i * kW, static_cast<U>(load<U>(before + i * kW) + d));
    ++k;
  }
}

template <template <typename> class Fn, typename... Args>
auto by_width(std::size_t width, Args&&... args) {
  switch (width) {
    case 1:
      return Fn<std::uint8_t>::run(args...);
    case 2:
      return Fn<std::uint16_t>::run(args...);
    case 4:
      return Fn<std::uint32_t>::run(args...);
    default:
      return Fn<std::uint64_t>::run(args...);
  }
}

template <typename U>
struct DeltaFn {
  static std::size_t run(const std::uint8_t* a, const std::uint8_t* b, std::size_t n,
                         std::uint8_t* m, std::uint8_t* d) {
    return delta<U>(a, b, n, m, d);
  }
};
template <typename U>
struct UndeltaFn {
  static int run(const std::uint8_t* b, const std::uint8_t* m, const std::uint8_t* d, std::size_t c,
                 std::size_t n, std::uint8_t* a) {
    undelta<U>(b, m, d, c, n, a);
    return 0;
  }
};

std::size_t popcount_bits(std::span<const std::uint8_t> mask, std::size_t n) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < n / 8; ++i) count += static_cast<std::size_t>(std::popcount(mask[i]));
  if (n % 8)
    count += static_cast<std::size_t>(
        std::popcount(static_cast<unsigned>(mask[n / 8] & ((1u << (n % 8)) - 1))));
  return count;
}

}  // namespace

std::size_t word_size(WordKind kind) {
  switch (kind) {
    case WordKind::kByte:
      return 1;
    case WordKind::kU16:
    case WordKind::kF16:
    case WordKind::kBF16:
      return 2;
    case WordKind::kU32:
    case WordKind::kF32:
      return 4;
    case WordKind::kU64:
    case WordKind::kF64:
      return 8;
  }
  return 1;
}

WordKind word_kind_for(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return WordKind::kF64;
    case DType::kF32:
      return WordKind::kF32;
    case DType::kF16:
      return WordKind::kF16;
    case DType::kBF16:
      return WordKind::kBF16;
    case DType::kI64:
      return WordKind::kU64;
    case DType::kI32:
      return WordKind::kU32;
    case DType::kI16:
      return WordKind::kU16;
    default:
      return WordKind::kByte;
  }
}

void split_planes(WordKind kind, std::span<const std::uint8_t> words, std::span<std::uint8_t> out) {
  std::size_t n = words.size() / word_size(kind);
  switch (kind) {
    case WordKind::kByte:
      std::memcpy(out.data(), words.data(), words.size());
      return;
    case WordKind::kU16:
      return split<std::uint16_t, 0>(words.data(), out.data(), n);
    case WordKind::kU32:
      return split<std::uint32_t, 0>(words.data(), out.data(), n);
    case WordKind::kU64:
      return split<std::uint64_t, 0>(words.data(), out.data(), n);
    case WordKind::kF16:
      return split<std::uint16_t, 5>(words.data(), out.data(), n);
    case WordKind::kBF16:
      return split<std::uint16_t, 8>(words.data(), out.data(), n);
    case WordKind::kF32:
      return split<std::uint32_t, 8>(words.data(), out.data(), n);
    case WordKind::kF64:
      return split<std::uint64_t, 11>(words.data(), out.data(), n);
  }
}

void merge_planes(WordKind kind, std::span<const std::uint8_t> planes,
                  std::span<std::uint8_t> out) {
  std::size_t n = planes.size() / word_size(kind);
  switch (kind) {
    case WordKind::kByte:
      std::memcpy(out.data(), planes.data(), planes.size());
      return;
    case WordKind::kU16:
      return merge<std::uint16_t, 0>(planes.data(), out.data(), n);
    case WordKind::kU32:
      return merge<std::uint32_t, 0>(planes.data(), out.data(), n);
    case WordKind::kU64:
      return merge<std::uint64_t, 0>(planes.data(), out.data(), n);
    case WordKind::kF16:
      return merge<std::uint16_t, 5>(planes.data(), out.data(), n);
    case WordKind::kBF16:
      return merge<std::uint16_t, 8>(planes.data(), out.data(), n);
    case WordKind::kF32:
      return merge<std::uint32_t, 8>(planes.data(), out.data(), n);
    case WordKind::kF64:
      return merge<std::uint64_t, 11>(planes.data(), out.data(), n);
  }
}

std::size_t delta_planes(WordKind kind, std::span<const std::uint8_t> after,
                         std::span<const std::uint8_t> before, std::span<std::uint8_t> mask,
                         std::span<std::uint8_t> diffs) {
  std::size_t w = word_size(kind);
  return by_width<DeltaFn>(w, after.data(), before.data(), after.size() / w, mask.data(),
                           diffs.data());
}

Status undelta_planes(WordKind kind, std::span<const std::uint8_t> before,
                      std::span<const std::uint8_t> mask, std::span<const std::uint8_t> diffs,
                      std::size_t changed, std::span<std::uint8_t> after) {
  std::size_t w = word_size(kind);
  std::size_t n = after.size() / w;
  if (before.size() != after.size() || mask.size() != (n + 7) / 8 || diffs.size() != changed * w) {
    return internal_error("undelta_planes: inconsistent buffer sizes");
  }
  std::size_t set = popcount_bits(mask, n);
  if (set != changed) {
    return invalid_input("change mask marks " + std::to_string(set) + " words but " +
                         std::to_string(changed) + " differences are stored");
  }
  by_width<UndeltaFn>(w, before.data(), mask.data(), diffs.data(), changed, n, after.data());
  return {};
}

}  // namespace vt::comp
