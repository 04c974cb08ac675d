#pragma once
// The inputs of the known-answer vectors in docs/fingerprint.md, shared by the KAT test and the
// Python reference test.

#include <bit>

#include "common/safetensors.h"

namespace vt::fp::kat {

// 00 01 02 ... 1f
inline Digest task_id() {
  Digest d;
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>(i);
  return d;
}

// Byte i is i mod 251: no period that lines up with the 1 MiB chunks.
inline Bytes pattern(std::size_t n) {
  Bytes out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(i % 251);
  return out;
}

// The snapshot of docs/fingerprint.md, "Known-answer vectors".
inline Bytes snapshot() {
  Bytes w, bias, b, c, step;
  for (int i = 0; i < 32; ++i)
    append_u32le(w, std::bit_cast<std::uint32_t>(static_cast<float>(i) * 0.25f - 3.0f));
  for (int i = 0; i < 3; ++i) {
    bias.push_back(0x00);
    bias.push_back(static_cast<std::uint8_t>(0x3c + i));
  }
  for (int i = 0; i < 5; ++i) {
    b.push_back(static_cast<std::uint8_t>(0x80 + i));
    b.push_back(0x3f);
  }
  append_u64le(c, std::bit_cast<std::uint64_t>(1.5));
  append_u64le(c, std::bit_cast<std::uint64_t>(-2.25));
  append_u64le(step, 7);
  return write_canonical({{{"a.weight", DType::kF32, {4, 8}}, w},
                          {{"a.bias", DType::kF16, {3}}, bias},
                          {{"b", DType::kBF16, {5}}, b},
                          {{"c", DType::kF64, {2}}, c},
                          {{"step", DType::kI64, {}}, step}},
                         {{"format", "pt"}})
      .value();
}

}  // namespace vt::fp::kat
