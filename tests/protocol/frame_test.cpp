#include "protocol/net/frame.h"

#include <gtest/gtest.h>

#include "common/sha256.h"
#include "protocol/net/chunk_proofs.h"

namespace vt::wire {
namespace {

using nlohmann::json;

Bytes sample_frame() {
  Bytes payload = {1, 2, 3, 0, 255};
  return encode_frame(MessageType::kGetSnapshot, json{{"epoch", 3}, {"codec", "planes"}}, payload);
}

TEST(Frame, LayoutMatchesTheDocumentedBytes) {
  Bytes f = encode_frame(MessageType::kGetTask, json::object());
  // "VTWP", version 1, type 2, flags 0, header length 2 ("{}"), payload length 0.
  Bytes want = {0x56, 0x54, 0x57, 0x50, 0x01, 0x02, 0x00, 0x00, 0x02,
                0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, '{',  '}'};
  EXPECT_EQ(f, want);
}

TEST(Frame, RoundTrip) {
  Bytes f = sample_frame();
  auto r = parse_frame(f, {});
  ASSERT_TRUE(r.frame.ok()) << r.frame.error.message;
  EXPECT_EQ(r.consumed, f.size());
  EXPECT_EQ(r.frame.value->type, MessageType::kGetSnapshot);
  EXPECT_EQ(r.frame.value->header["epoch"], 3);
  EXPECT_EQ(r.frame.value->payload, (Bytes{1, 2, 3, 0, 255}));
  EXPECT_EQ(*get_u64(*r.frame.value, "epoch"), 3u);
  EXPECT_EQ(*get_string(*r.frame.value, "codec"), "planes");
  EXPECT_FALSE(get_u64(*r.frame.value, "codec").ok());
  EXPECT_NE(get_u64(*r.frame.value, "offset")
                .error()
                .message.find("get_snapshot header: offset: missing; expected an unsigned integer"),
            std::string::npos);
}

TEST(Frame, EveryTruncationAsksForMore) {
  Bytes f = sample_frame();
  for (std::size_t n = 0; n < f.size(); ++n) {
    auto r = parse_frame(ByteSpan(f).first(n), {});
    EXPECT_TRUE(r.need_more) << n;
    EXPECT_FALSE(r.frame.ok()) << n;
    EXPECT_EQ(r.consumed, 0u);
  }
}

FrameError error_of(const Bytes& f, FrameLimits limits = {}) {
  auto r = parse_frame(f, limits);
  EXPECT_FALSE(r.frame.ok());
  EXPECT_FALSE(r.need_more);
  return r.frame.error;
}

TEST(Frame, RefusesBrokenPrefixes) {
  Bytes f = sample_frame();
  Bytes bad = f;
  bad[0] = 'X';
  EXPECT_EQ(error_of(bad).errc, FrameErrc::kBadMagic);
  EXPECT_EQ(frame_errc_code(FrameErrc::kBadMagic), "bad_frame");
  bad = f;
  bad[4] = 2;
  EXPECT_EQ(error_of(bad).errc, FrameErrc::kBadVersion);
  EXPECT_EQ(frame_errc_code(FrameErrc::kBadVersion), "unsupported_version");
  for (std::uint8_t t : {0, 18, 200}) {
    bad = f;
    bad[5] = t;
    EXPECT_EQ(error_of(bad).errc, FrameErrc::kBadType) << int(t);
  }
  bad = f;
  bad[7] = 1;
  EXPECT_EQ(error_of(bad).errc, FrameErrc::kBadFlags);
  bad = f;
  put_u32le(bad.data() + 8, 1);
  EXPECT_EQ(error_of(bad).errc, FrameErrc::kBadHeader);
}

TEST(Frame, RefusesWhatExceedsTheLimitsBeforeReadingIt) {
  Bytes f = sample_frame();
  put_u32le(f.data() + 12, 0xFFFFFFFFu);  // a 4 GiB payload, declared but never sent
  FrameError e = error_of(f);
  EXPECT_EQ(e.errc, FrameErrc::kTooLarge);
  EXPECT_NE(e.message.find("payload of 4294967295 bytes exceeds the limit of 4194304"),
            std::string::npos)
      << e.message;
  f = sample_frame();
  EXPECT_EQ(error_of(f, FrameLimits{8, 1024}).errc, FrameErrc::kTooLarge);  // header > 8 bytes
  EXPECT_EQ(frame_errc_code(FrameErrc::kTooLarge), "frame_too_large");
}

TEST(Frame, HeaderMustBeAJsonObject) {
  for (std::string header : {"[1,2]", "{\"a\":", "nul", "\"\xff\xfe\""}) {
    Bytes f = encode_frame(MessageType::kHello, json::object());
    f.resize(kPrefixSize);
    put_u32le(f.data() + 8, static_cast<std::uint32_t>(header.size()));
    append_bytes(f, as_bytes(header));
    EXPECT_EQ(error_of(f).errc, FrameErrc::kBadHeader) << header;
  }
}

TEST(Frame, TwoFramesBackToBack) {
  Bytes a = sample_frame(), b = encode_error("not_found", "epoch 9 is not committed");
  Bytes both = a;
  append_bytes(both, b);
  auto first = parse_frame(both, {});
  ASSERT_TRUE(first.frame.ok());
  auto second = parse_frame(ByteSpan(both).subspan(first.consumed), {});
  ASSERT_TRUE(second.frame.ok());
  EXPECT_EQ(second.frame.value->type, MessageType::kError);
  EXPECT_EQ(second.frame.value->header["code"], "not_found");
}

TEST(ChunkProofs, EqualFingerprintProofsAndVerify) {
  for (std::uint64_t size : std::vector<std::uint64_t>{
           1, fp::kMerkleChunkSize, 5 * fp::kMerkleChunkSize + 17, 8 * fp::kMerkleChunkSize}) {
    Bytes bytes(size);
    for (std::size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<std::uint8_t>(i * 131 + (i >> 20));
    Digest root = fp::merkle_root(bytes);
    std::vector<std::uint64_t> indices;
    for (std::uint64_t i = 0; i < fp::merkle_chunk_count(size); ++i) indices.push_back(i);
    auto proofs = prove_chunks(bytes, indices);
    ASSERT_TRUE(proofs.ok());
    for (std::uint64_t i : indices) {
      auto want = fp::prove_chunk(bytes, i);
      ASSERT_TRUE(want.ok());
      EXPECT_EQ((*proofs)[i].siblings, want->siblings) << size << " chunk " << i;
      EXPECT_EQ((*proofs)[i].chunk_count, want->chunk_count);
      std::uint64_t begin = i * fp::kMerkleChunkSize;
      ByteSpan chunk = ByteSpan(bytes).subspan(
          begin, std::min<std::uint64_t>(fp::kMerkleChunkSize, size - begin));
      EXPECT_TRUE(fp::verify_chunk(root, chunk, (*proofs)[i]));
    }
  }
  Bytes three(3 * fp::kMerkleChunkSize);
  std::vector<std::uint64_t> bad = {0, 3};
  auto r = prove_chunks(three, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("chunk 3 does not exist: the snapshot has 3 chunks"),
            std::string::npos);
}

}  // namespace
}  // namespace vt::wire
