#include "compression/planes.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace vt::comp {
namespace {

Bytes words_of(std::initializer_list<float> values) {
  Bytes out(values.size() * 4);
  std::size_t i = 0;
  for (float v : values) std::memcpy(out.data() + 4 * i++, &v, 4);
  return out;
}

TEST(Planes, F32ExponentGetsTheTopPlaneAndSignSitsAboveTheMantissa) {
  Bytes in = words_of({1.0f, -1.0f, 0.5f});  // 0x3F800000, 0xBF800000, 0x3F000000
  Bytes planes(in.size());
  split_planes(WordKind::kF32, in, planes);
  const std::uint8_t* exp = planes.data() + 3 * 3;
  EXPECT_EQ(exp[0], 127);
  EXPECT_EQ(exp[1], 127);  // the sign does not disturb the exponent plane
  EXPECT_EQ(exp[2], 126);
  const std::uint8_t* high = planes.data() + 2 * 3;  // sign + top 7 mantissa bits
  EXPECT_EQ(high[0], 0x00);
  EXPECT_EQ(high[1], 0x80);
  EXPECT_EQ(high[2], 0x00);
}

TEST(Planes, Bf16AndF16Layouts) {
  Bytes bf{0x80, 0x3F, 0x80, 0xBF};  // bf16 1.0, -1.0
  Bytes planes(4);
  split_planes(WordKind::kBF16, bf, planes);
  EXPECT_EQ(planes[2], 0x7F);  // exponent plane
  EXPECT_EQ(planes[3], 0x7F);
  EXPECT_EQ(planes[0], 0x00);
  EXPECT_EQ(planes[1], 0x80);  // sign on top of the 7 mantissa bits
  Bytes f16{0x00, 0x3C};       // f16 1.0: exponent 15, mantissa 0
  Bytes p16(2);
  split_planes(WordKind::kF16, f16, p16);
  EXPECT_EQ(p16[1], 15 << 3);  // five exponent bits, then the top three mantissa bits
  EXPECT_EQ(p16[0], 0);
}

TEST(Planes, SplitMergeRoundTripsEveryWordKind) {
  std::mt19937_64 rng(1);
  for (std::uint8_t k = 0; k < kWordKindCount; ++k) {
    auto kind = static_cast<WordKind>(k);
    Bytes in(8 * 257);
    for (auto& b : in) b = static_cast<std::uint8_t>(rng());
    // NaN, infinities and negative zero must survive too.
    std::memset(in.data(), 0xFF, 8);
    in[8 + word_size(kind) - 1] = 0x80;
    Bytes planes(in.size()), back(in.size());
    split_planes(kind, in, planes);
    merge_planes(kind, planes, back);
    EXPECT_EQ(back, in) << "word kind " << static_cast<int>(kind);
  }
}

TEST(Planes, DeltaZigzagsSmallDifferences) {
  Bytes before{10, 0, 0, 0, 10, 0, 0, 0, 10, 0, 0, 0};
  Bytes after{11, 0, 0, 0, 10, 0, 0, 0, 9, 0, 0, 0};  // +1, same, -1
  Bytes mask(1), diffs(12);
  std::size_t changed = delta_planes(WordKind::kF32, after, before, mask, diffs);
  ASSERT_EQ(changed, 2u);
  EXPECT_EQ(mask[0], 0b101);
  EXPECT_EQ(diffs[0], 2);                                   // zigzag(+1)
  EXPECT_EQ(diffs[1], 1);                                   // zigzag(-1)
  for (int i = 2; i < 8; ++i) EXPECT_EQ(diffs[i], 0) << i;  // high planes of small differences
  Bytes back(12);
  ASSERT_TRUE(undelta_planes(WordKind::kF32, before, mask, ByteSpan(diffs).first(8), 2, back).ok());
  EXPECT_EQ(back, after);
}

TEST(Planes, DeltaRoundTripsEveryWidthIncludingWraparound) {
  std::mt19937_64 rng(2);
  for (WordKind kind :
       {WordKind::kByte, WordKind::kU16, WordKind::kBF16, WordKind::kF32, WordKind::kF64}) {
    std::size_t w = word_size(kind), n = 1001;
    Bytes before(n * w), after;
    for (auto& b : before) b = static_cast<std::uint8_t>(rng());
    after = before;
    for (std::size_t i = 0; i < n; i += 3)
      after[i * w + w - 1] ^= static_cast<std::uint8_t>(rng() | 1);
    Bytes mask((n + 7) / 8), diffs(n * w);
    std::size_t changed = delta_planes(kind, after, before, mask, diffs);
    EXPECT_EQ(changed, (n + 2) / 3);
    Bytes back(n * w);
    ASSERT_TRUE(
        undelta_planes(kind, before, mask, ByteSpan(diffs).first(changed * w), changed, back).ok());
    EXPECT_EQ(back, after) << "word kind " << static_cast<int>(kind);
  }
}

TEST(Planes, UndeltaRejectsAMaskThatDisagreesWithTheCount) {
  Bytes before(16, 0), after(16), mask{0b0011}, diffs{2, 2, 0, 0, 0, 0, 0, 0};
  Status st = undelta_planes(WordKind::kF32, before, mask, ByteSpan(diffs).first(4), 1, after);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("marks 2 words but 1"), std::string::npos)
      << st.error().message;
}

}  // namespace
}  // namespace vt::comp
