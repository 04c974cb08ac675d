// Truncated, corrupted and hand-crafted containers: each must fail with an error that names what
// is wrong and where, never crash or allocate what a header merely claims.

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "common/file_io.h"
#include "compression/container.h"
#include "compression/format.h"
#include "tests/compression/test_states.h"

namespace vt::comp {
namespace {

Bytes sample_container(Codec codec = Codec::kPlanes) {
  EncodeOptions eo;
  eo.codec = codec;
  eo.chunk_size = 4096;
  auto c = encode(testing::to_canonical(testing::mixed_tensors(11)), eo);
  EXPECT_TRUE(c.ok());
  return c.ok() ? std::move(c).value() : Bytes{};
}

std::string decode_error(ByteSpan container) {
  auto r = decode(container, {});
  if (r.ok()) return "<decoded>";
  EXPECT_EQ(r.error().code, Errc::kInvalidInput) << r.error().message;
  return r.error().message;
}

// Rewrites the header and table of `container` after `edit` changes its info, keeping the payloads,
// so that checksums match and only the edited field is wrong.
template <typename Edit>
Bytes rewrite(const Bytes& container, Edit edit) {
  auto info = read_container_info(container);
  EXPECT_TRUE(info.ok());
  ContainerInfo edited = *info;
  std::uint64_t payload_start =
      info->sections.empty() ? container.size() : info->sections[0].payload_offset;
  edit(edited);
  Bytes out = format::write_header_and_table(edited);
  out.insert(out.end(), container.begin() + static_cast<std::ptrdiff_t>(payload_start),
             container.end());
  return out;
}

TEST(Hostile, EveryTruncationIsAnError) {
  Bytes c = sample_container();
  for (std::size_t len = 0; len < c.size(); len += (len < 400 ? 1 : 97)) {
    std::string err = decode_error(ByteSpan(c).first(len));
    EXPECT_NE(err, "<decoded>") << len;
  }
  EXPECT_NE(decode_error(ByteSpan(c).first(c.size() - 1)).find("truncated or trailing"),
            std::string::npos);
}

TEST(Hostile, CorruptedPayloadNamesTheSection) {
  Bytes c = sample_container();
  auto info = read_container_info(c);
  ASSERT_TRUE(info.ok());
  const SectionInfo& s = info->sections[3];
  ASSERT_EQ(s.label(),
            "section 3 (tensor 'big.weight' chunk 1)");  // after the header and bf16.weight
  c[s.payload_offset + s.payload_size / 2] ^= 0x10;
  std::string err = decode_error(c);
  EXPECT_NE(err.find(s.label()), std::string::npos) << err;
  EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << err;
  auto extracted = extract_section(c, 3);
  EXPECT_FALSE(extracted.ok());
}

TEST(Hostile, CorruptedHeaderOrTableIsCaughtByTheHeaderChecksum) {
  Bytes c = sample_container();
  for (std::size_t at : {std::size_t{16}, std::size_t{60}, format::kHeaderSize + 9}) {
    Bytes bad = c;
    bad[at] ^= 0x01;
    EXPECT_NE(decode_error(bad).find("checksum mismatch"), std::string::npos) << at;
  }
  Bytes magic = c;
  magic[1] = 'X';
  EXPECT_NE(decode_error(magic).find("bad magic"), std::string::npos);
}

TEST(Hostile, RandomByteFlipsNeverDecode) {
  for (Codec codec : {Codec::kRaw, Codec::kZstd, Codec::kPlanes, Codec::kXz}) {
    Bytes c = sample_container(codec);
    std::mt19937_64 rng(12);
    for (int i = 0; i < 150; ++i) {
      Bytes bad = c;
      bad[rng() % bad.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
      EXPECT_NE(decode_error(bad), "<decoded>") << codec_name(codec) << " flip " << i;
    }
  }
}

TEST(Hostile, HugeDeclaredSizesAreRefusedBeforeAllocating) {
  Bytes c = sample_container();
  // 1 PiB in total: allocating it would throw; the limit check must come first.
  Bytes huge = rewrite(c, [](ContainerInfo& info) {
    info.raw_size = std::uint64_t{1} << 50;
    info.sections.back().raw_size +=
        (std::uint64_t{1} << 50) - info.sections.back().raw_offset - info.sections.back().raw_size;
  });
  std::string err = decode_error(huge);
  EXPECT_NE(err.find("above the section limit"), std::string::npos) << err;

  // Sections within their limit but adding up to more than the container can expand to.
  Bytes many = rewrite(c, [](ContainerInfo& info) {
    std::uint64_t grow = format::kMaxSectionRaw - info.sections[1].raw_size;
    info.sections[1].raw_size += grow;
    info.raw_size += grow;
  });
  DecodeOptions tight;
  tight.max_expansion = 16;
  auto r = decode(many, tight);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("above the limit"), std::string::npos) << r.error().message;

  DecodeOptions capped;
  capped.max_raw_size = 1000;
  auto r2 = decode(c, capped);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().message.find("max_raw_size"), std::string::npos);
}

TEST(Hostile, InconsistentTablesAreNamed) {
  Bytes c = sample_container();
  auto expect = [](const Bytes& bad, const std::string& what) {
    std::string err = decode_error(bad);
    EXPECT_NE(err.find(what), std::string::npos) << err;
  };
  expect(rewrite(c, [](ContainerInfo& i) { i.raw_size += 8; }), "sections hold");
  expect(rewrite(c,
                 [](ContainerInfo& i) {
                   i.sections[2].raw_size += 3;
                   i.raw_size += 3;
                 }),
         "not a multiple of the word size");
  expect(rewrite(c, [](ContainerInfo& i) { i.sections[2].method = Method::kXzPlanes; }),
         "not allowed in a planes container");
  expect(rewrite(c, [](ContainerInfo& i) { i.sections[2].raw_xxh3 ^= 1; }),
         "section 2 (tensor 'big.weight' chunk 0): decoded bytes do not match");
  expect(rewrite(c, [](ContainerInfo& i) { i.root[0] ^= 1; }), "Merkle root");
  // A section that claims fewer raw bytes than its frames hold: the frames are refused whole.
  expect(rewrite(c,
                 [](ContainerInfo& i) {
                   i.sections[2].raw_size -= 4;
                   i.sections[3].raw_size += 4;
                 }),
         "zstd frames declare");
}

TEST(Hostile, DeltaFieldsAreChecked) {
  auto tensors = testing::mixed_tensors(13);
  Bytes before = testing::to_canonical(tensors);
  testing::perturb_f32(tensors, 1e-4, 0.3, 14);
  Bytes after = testing::to_canonical(tensors);
  EncodeOptions eo;
  eo.codec = Codec::kDelta;
  eo.base = before;
  eo.chunk_size = 4096;
  auto c = encode(after, eo);
  ASSERT_TRUE(c.ok());
  auto info = read_container_info(*c);
  ASSERT_TRUE(info.ok());
  std::size_t k = 0;
  while (k < info->sections.size() && info->sections[k].method != Method::kDeltaPlanes) ++k;
  ASSERT_LT(k, info->sections.size());
  DecodeOptions d;
  d.base = before;
  auto run = [&](auto edit) {
    auto r = decode(rewrite(*c, edit), d);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_NE(run([&](ContainerInfo& i) {
              i.sections[k].base_offset = i.base_size;
            }).find("base range runs past"),
            std::string::npos);
  EXPECT_NE(run([&](ContainerInfo& i) {
              i.sections[k].changed = i.sections[k].raw_size + 1;
            }).find("more changed words"),
            std::string::npos);
  std::string shifted = run([&](ContainerInfo& i) { i.sections[k].base_offset += 4; });
  EXPECT_NE(shifted.find(info->sections[k].label()), std::string::npos) << shifted;
}

// The fuzzer's seed corpus must stay made of valid containers, or it seeds nothing.
TEST(Hostile, FuzzSeedCorpusDecodes) {
  std::filesystem::path dir = std::filesystem::path(VT_SOURCE_DIR) / "tests/fuzz/corpus/container";
  int seen = 0;
  for (const char* name : {"raw", "zstd", "planes", "xz", "delta"}) {
    auto bytes = read_file(dir / (std::string(name) + ".vtc"));
    ASSERT_TRUE(bytes.ok()) << bytes.error().message;
    auto info = read_container_info(*bytes);
    ASSERT_TRUE(info.ok()) << name << ": " << info.error().message;
    EXPECT_EQ(codec_name(info->codec), name);
    if (info->codec != Codec::kDelta) {
      auto r = decode(*bytes, {});
      EXPECT_TRUE(r.ok()) << name << ": " << r.error().message;
    }
    ++seen;
  }
  EXPECT_EQ(seen, 5);
}

}  // namespace
}  // namespace vt::comp
