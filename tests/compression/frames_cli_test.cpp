// A section extracted from a container is a standard zstd or xz frame sequence: the command-line
// tools decode it to the section's transformed stream (docs/container.md).

#include <gtest/gtest.h>

#include "common/file_io.h"
#include "compression/container.h"
#include "compression/frames.h"
#include "compression/planes.h"
#include "tests/compression/test_states.h"
#include "tests/test_util.h"

namespace vt::comp {
namespace {

Bytes decode_with_tool(const std::string& tool, const Bytes& payload,
                       const vt::testing::ScratchDir& dir) {
  auto in = dir / "section.bin";
  EXPECT_TRUE(write_file_atomic(in, ByteSpan(payload)).ok());
  auto r = vt::testing::run_command(tool + " -d -c " + in.string(), dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return Bytes(r.out.begin(), r.out.end());
}

struct Case {
  Codec codec;
  const char* tool;
};

TEST(FramesCli, ExtractedSectionsDecodeWithTheStandardTools) {
  vt::testing::ScratchDir dir;
  Bytes canonical = testing::to_canonical(testing::mixed_tensors(21));
  for (Case c :
       {Case{Codec::kZstd, "zstd"}, Case{Codec::kPlanes, "zstd"}, Case{Codec::kXz, "xz"}}) {
    if (!vt::testing::have_program(c.tool)) {
      GTEST_SKIP() << c.tool << " is not installed";
    }
    EncodeOptions eo;
    eo.codec = c.codec;
    eo.chunk_size = 4096;
    auto container = encode(canonical, eo);
    ASSERT_TRUE(container.ok());
    auto info = read_container_info(*container);
    ASSERT_TRUE(info.ok());
    for (std::uint32_t i : {0u, 2u, 8u}) {  // the header, a big.weight chunk (f32), rng.cpu (u8)
      const SectionInfo& s = info->sections[i];
      auto extracted = extract_section(*container, i);
      ASSERT_TRUE(extracted.ok()) << extracted.error().message;
      EXPECT_EQ(extracted->format, c.codec == Codec::kXz ? FrameFormat::kXz : FrameFormat::kZstd);
      Bytes got = decode_with_tool(c.tool, extracted->payload, dir);
      ByteSpan raw = ByteSpan(canonical).subspan(s.raw_offset, s.raw_size);
      Bytes want(raw.begin(), raw.end());
      if (c.codec != Codec::kZstd) split_planes(s.word, raw, want);
      EXPECT_EQ(got, want) << codec_name(c.codec) << " " << s.label();
    }
  }
}

TEST(FramesCli, HandWrittenRawFramesAreStandardZstd) {
  if (!vt::testing::have_program("zstd")) GTEST_SKIP() << "zstd is not installed";
  vt::testing::ScratchDir dir;
  std::mt19937_64 rng(23);
  for (std::size_t n :
       {std::size_t{0}, std::size_t{1}, std::size_t{128} << 10, std::size_t{300000}}) {
    Bytes in = testing::random_bytes(n, rng), frame;
    append_raw_zstd_frame(frame, in);
    EXPECT_EQ(decode_with_tool("zstd", frame, dir), in) << n;
    Bytes back(n);
    EXPECT_TRUE(zstd_decode_exact(frame, back).ok());
    EXPECT_EQ(back, in);
  }
}

TEST(FramesCli, ExtractRejectsAMissingSection) {
  auto container = encode(testing::to_canonical(testing::mixed_tensors(22)), {});
  ASSERT_TRUE(container.ok());
  auto r = extract_section(*container, 999);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("section 999 does not exist"), std::string::npos);
}

}  // namespace
}  // namespace vt::comp
