#include "common/bytes.h"

#include <gtest/gtest.h>

#include "common/sha256.h"

namespace vt {
namespace {

TEST(Hex, RoundTripsAndRejectsBadDigits) {
  Bytes b{0x00, 0x7f, 0xff, 0x10};
  EXPECT_EQ(hex_encode(b), "007fff10");
  EXPECT_EQ(*hex_decode("007FFF10"), b);
  EXPECT_FALSE(hex_decode("abc").ok());
  auto bad = hex_decode("zz");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("offset 0"), std::string::npos);
}

TEST(Base64, RoundTripsEveryPaddingAndRefusesWhatIsNotBase64) {
  // RFC 4648's test vectors.
  const std::pair<std::string, std::string> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(as_bytes(plain)), encoded);
    auto back = base64_decode(encoded);
    ASSERT_TRUE(back.ok()) << encoded;
    EXPECT_EQ(std::string(back->begin(), back->end()), plain);
  }
  Bytes all(256);
  for (int i = 0; i < 256; ++i) all[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
  EXPECT_EQ(*base64_decode(base64_encode(all)), all);
  for (const char* bad : {"Zm9", "Zm9v\n", "Zm=v", "Zm9*", "===="}) {
    auto r = base64_decode(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_NE(base64_decode("Zm9*").error().message.find("offset 3"), std::string::npos);
}

TEST(Hex, DigestNeedsExactly64Digits) {
  auto d = digest_from_hex(std::string(63, 'a'), "root");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("root"), std::string::npos);
  EXPECT_TRUE(digest_from_hex(std::string(64, 'a'), "root").ok());
}

TEST(LittleEndian, RoundTrips) {
  std::uint8_t buf[8];
  put_u64le(buf, 0x0102030405060708ull);
  EXPECT_EQ(buf[0], 0x08);
  EXPECT_EQ(get_u64le(buf), 0x0102030405060708ull);
  put_u32le(buf, 0xdeadbeef);
  EXPECT_EQ(get_u32le(buf), 0xdeadbeefu);
}

TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(hex_encode(sha256(std::string_view(""))),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex_encode(sha256(std::string_view("abc"))),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 h;
  h.update(std::string_view("a")).update(std::string_view("bc"));
  EXPECT_EQ(h.finish(), sha256(std::string_view("abc")));
  // finish() resets, so the object hashes again from scratch.
  EXPECT_EQ(h.finish(), sha256(std::string_view("")));
}

}  // namespace
}  // namespace vt
