#pragma once
// Word transforms that make float tensors compressible (docs/container.md, "Transforms").
//
// A float word (sign, exponent, mantissa) has its top bits rotated to (exponent, sign, mantissa),
// so the top byte holds exponent bits only (eight for f32/bf16, the high eight of f64's eleven,
// f16's five, then the sign and two mantissa bits) and the sign sits just above the mantissa. The
// words are then split into byte planes, plane p holding byte p of every word: the exponent plane
// carries the few bits of real entropy, the low mantissa planes are close to uniform and are stored
// raw. Integer words are split as they are.
//
// A delta codes an "after" word run against a "before" run of the same kind: a bitmap of the
// words that differ, then the zigzag-coded integer difference (after - before, modulo 2^bits) of
// each changed word, split into byte planes. Small float updates keep the exponent and the high
// mantissa bits, so the differences have short magnitudes and their high planes are zero.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/result.h"
#include "common/safetensors.h"

namespace vt::comp {

enum class WordKind : std::uint8_t {
  kByte = 0,  // one-byte words: a single plane, no transform
  kU16 = 1,
  kU32 = 2,
  kU64 = 3,
  kF16 = 4,
  kBF16 = 5,
  kF32 = 6,
  kF64 = 7,
};
inline constexpr std::uint8_t kWordKindCount = 8;

std::size_t word_size(WordKind kind);
WordKind word_kind_for(DType dtype);

// Plane-major split of `words` (a multiple of word_size bytes) into `out` (the same size).
void split_planes(WordKind kind, std::span<const std::uint8_t> words, std::span<std::uint8_t> out);
// The inverse of split_planes.
void merge_planes(WordKind kind, std::span<const std::uint8_t> planes, std::span<std::uint8_t> out);

// Writes the change bitmap (bit i of byte i/8 set when word i differs) into `mask`
// ((n + 7) / 8 bytes) and the plane-major zigzag differences of the changed words into `diffs`
// (at least n * word_size bytes). Returns the number of changed words; the planes of `diffs` are
// then each `changed` bytes long, packed from the start of `diffs`.
std::size_t delta_planes(WordKind kind, std::span<const std::uint8_t> after,
                         std::span<const std::uint8_t> before, std::span<std::uint8_t> mask,
                         std::span<std::uint8_t> diffs);

// The inverse of delta_planes: rebuilds `after` from `before`, the mask and the packed planes of
// `changed` differences. Fails when the mask's population count is not `changed`.
Status undelta_planes(WordKind kind, std::span<const std::uint8_t> before,
                      std::span<const std::uint8_t> mask, std::span<const std::uint8_t> diffs,
                      std::size_t changed, std::span<std::uint8_t> after);

}  // namespace vt::comp
