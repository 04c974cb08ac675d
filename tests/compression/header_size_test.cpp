// The encoder never writes what the decoder refuses: a safetensors header may reach 100 MiB
// (kMaxSafetensorsHeader), a section at most 64 MiB (kMaxSectionRaw). Headers of every size up
// to past the section limit must round-trip, whole and as deltas.

#include <gtest/gtest.h>

#include "common/safetensors.h"
#include "compression/container.h"
#include "compression/format.h"

namespace vt::comp {
namespace {

// A snapshot whose header is about `header_bytes` long (the metadata carries the padding).
Bytes snapshot_with_header(std::uint64_t header_bytes, float shift) {
  std::vector<float> weights(4096);
  for (std::size_t i = 0; i < weights.size(); ++i)
    weights[i] = 0.001f * static_cast<float>(i) + shift;
  std::vector<TensorData> tensors = {
      {{"w", DType::kF32, {static_cast<std::int64_t>(weights.size())}},
       ByteSpan(reinterpret_cast<const std::uint8_t*>(weights.data()), weights.size() * 4)}};
  // Hex noise: a padding of one letter would compress past the decoder's expansion bound.
  std::string pad(header_bytes, '0');
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (char& c : pad) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = "0123456789abcdef"[x & 15];
  }
  auto bytes = write_canonical(tensors, {{"pad", pad}});
  EXPECT_TRUE(bytes.ok()) << bytes.error().message;
  return bytes.ok() ? std::move(bytes).value() : Bytes{};
}

void expect_round_trip(std::uint64_t header_bytes, std::uint64_t chunk_size,
                       bool delta_too = true) {
  SCOPED_TRACE("header " + std::to_string(header_bytes) + " bytes, chunk " +
               std::to_string(chunk_size));
  const Bytes base = delta_too ? snapshot_with_header(header_bytes, 0.0f) : Bytes{};
  const Bytes after = snapshot_with_header(header_bytes, 0.5f);
  EncodeOptions whole;
  whole.chunk_size = chunk_size;
  auto c = encode(after, whole);
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto info = read_container_info(*c);
  ASSERT_TRUE(info.ok()) << info.error().message;
  for (const SectionInfo& s : info->sections)
    EXPECT_LE(s.raw_size, std::min<std::uint64_t>(chunk_size, format::kMaxSectionRaw));
  auto back = decode(*c, {});
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(*back == after);
  if (!delta_too) return;

  EncodeOptions delta = whole;
  delta.codec = Codec::kDelta;
  delta.base = base;
  auto d = encode(after, delta);
  ASSERT_TRUE(d.ok()) << d.error().message;
  DecodeOptions dec;
  dec.base = base;
  auto back_delta = decode(*d, dec);
  ASSERT_TRUE(back_delta.ok()) << back_delta.error().message;
  EXPECT_TRUE(*back_delta == after);
}

TEST(HeaderSize, EveryHeaderSizeAroundTheChunkRoundTrips) {
  for (std::uint64_t header : {100u, 4000u, 4096u, 4200u, 8192u, 20000u})
    expect_round_trip(header, 4096);
}

TEST(HeaderSize, HeaderAboveTheSectionLimitRoundTrips) {
  // The case that used to fail: one 65 MiB header section, which the decoder refuses.
  expect_round_trip((65u << 20), 1u << 20, /*delta_too=*/false);
}

}  // namespace
}  // namespace vt::comp
