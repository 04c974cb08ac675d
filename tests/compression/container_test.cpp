#include "compression/container.h"

#include <gtest/gtest.h>

#include "common/thread_pool.h"
#include "fingerprint/merkle.h"
#include "tests/compression/test_states.h"

namespace vt::comp {
namespace {

using testing::mixed_tensors;
using testing::to_canonical;

constexpr Codec kAllButDelta[] = {Codec::kRaw, Codec::kZstd, Codec::kPlanes, Codec::kXz};

TEST(Container, CodecNamesRoundTrip) {
  for (Codec c : {Codec::kRaw, Codec::kZstd, Codec::kPlanes, Codec::kDelta, Codec::kXz}) {
    auto parsed = parse_codec(codec_name(c));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, c);
  }
  auto bad = parse_codec("gzip");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("'gzip'"), std::string::npos);
}

TEST(Container, EveryCodecRoundTripsEveryDtypeSeriallyAndInParallel) {
  Bytes canonical = to_canonical(mixed_tensors(1));
  ThreadPool pool(3);
  for (Codec codec : kAllButDelta) {
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      EncodeOptions eo;
      eo.codec = codec;
      eo.chunk_size = 4096;
      eo.pool = p;
      auto container = encode(canonical, eo);
      ASSERT_TRUE(container.ok()) << codec_name(codec) << ": " << container.error().message;
      DecodeOptions d;
      d.pool = p;
      auto back = decode(*container, d);
      ASSERT_TRUE(back.ok()) << codec_name(codec) << ": " << back.error().message;
      EXPECT_EQ(*back, canonical) << codec_name(codec);
    }
  }
}

TEST(Container, SectionsFollowTheSafetensorsLayout) {
  Bytes canonical = to_canonical(mixed_tensors(2));
  EncodeOptions eo;
  eo.chunk_size = 4096;
  auto container = encode(canonical, eo);
  ASSERT_TRUE(container.ok());
  auto info = read_container_info(*container);
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->codec, Codec::kPlanes);
  EXPECT_EQ(info->raw_size, canonical.size());
  EXPECT_EQ(info->container_size, container->size());
  EXPECT_EQ(info->root, fp::merkle_root(canonical));
  EXPECT_FALSE(info->base_root);
  // Header, big.weight in 6 chunks of 4 KiB, then one section per non-empty tensor (8 more).
  ASSERT_EQ(info->sections.size(), 1u + 6u + 8u);
  EXPECT_EQ(info->sections[0].label(), "section 0 (safetensors header)");
  auto view = parse_safetensors(canonical);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(info->sections[0].raw_size, view->data_start);
  std::uint64_t at = 0;
  int big_chunks = 0;
  for (const SectionInfo& s : info->sections) {
    EXPECT_EQ(s.raw_offset, at);
    at += s.raw_size;
    if (s.name == "big.weight") {
      EXPECT_EQ(s.chunk, static_cast<std::uint32_t>(big_chunks++));
      EXPECT_EQ(s.word, WordKind::kF32);
      EXPECT_EQ(s.raw_size, 4096u);
    }
    if (s.name == "bf16.weight") {
      EXPECT_EQ(s.word, WordKind::kBF16);
    }
    if (s.name == "step") {
      EXPECT_EQ(s.word, WordKind::kU64);
    }
  }
  EXPECT_EQ(big_chunks, 6);
  EXPECT_EQ(at, canonical.size());
}

TEST(Container, PlanesBeatsPlainZstdOnGaussianWeights) {
  std::mt19937_64 rng(3);
  Bytes canonical =
      to_canonical({{{"w", DType::kF32, {1 << 18}}, testing::gaussian_f32(1 << 18, 0.02, rng)}});
  EncodeOptions planes, zstd;
  zstd.codec = Codec::kZstd;
  auto p = encode(canonical, planes);
  auto z = encode(canonical, zstd);
  ASSERT_TRUE(p.ok() && z.ok());
  double planes_ratio = double(canonical.size()) / p->size();
  double zstd_ratio = double(canonical.size()) / z->size();
  // N(0, 0.02) has about 2.5 bits of exponent entropy: 32 / (24 + 2.6) is about 1.20.
  EXPECT_GT(planes_ratio, 1.17);
  EXPECT_GT(planes_ratio, zstd_ratio + 0.05);
}

struct Pair {
  Bytes before, after;
};

Pair small_update_pair(double fraction) {
  auto tensors = mixed_tensors(4);
  Pair p{to_canonical(tensors), {}};
  testing::perturb_f32(tensors, 1e-4, fraction, 5);
  p.after = to_canonical(tensors);
  return p;
}

TEST(Container, DeltaRoundTripsAndIsSmallForSmallUpdates) {
  Pair p = small_update_pair(0.2);
  EncodeOptions delta;
  delta.codec = Codec::kDelta;
  delta.base = p.before;
  delta.chunk_size = 4096;
  auto container = encode(p.after, delta);
  ASSERT_TRUE(container.ok()) << container.error().message;
  auto planes = encode(p.after, EncodeOptions{});
  ASSERT_TRUE(planes.ok());
  EXPECT_LT(container->size(), planes->size() / 2);

  auto info = read_container_info(*container);
  ASSERT_TRUE(info.ok());
  ASSERT_TRUE(info->base_root);
  EXPECT_EQ(*info->base_root, fp::merkle_root(p.before));
  EXPECT_EQ(info->base_size, p.before.size());
  bool saw_delta = false;
  for (const SectionInfo& s : info->sections)
    saw_delta |= s.method == Method::kDeltaPlanes && s.changed > 0;
  EXPECT_TRUE(saw_delta);

  DecodeOptions d;
  d.base = p.before;
  auto back = decode(*container, d);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, p.after);
}

TEST(Container, DeltaNamesAMissingOrWrongBase) {
  Pair p = small_update_pair(1.0);
  EncodeOptions delta;
  delta.codec = Codec::kDelta;
  delta.base = p.before;
  auto container = encode(p.after, delta);
  ASSERT_TRUE(container.ok());
  std::string root = hex_encode(fp::merkle_root(p.before));

  auto missing = decode(*container, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("needs its base snapshot (root " + root),
            std::string::npos)
      << missing.error().message;

  Bytes wrong = p.before;
  wrong.back() ^= 1;  // same size, different bytes
  DecodeOptions d;
  d.base = wrong;
  auto mismatched = decode(*container, d);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.error().message.find("coded against root " + root), std::string::npos)
      << mismatched.error().message;

  Bytes shorter(p.before.begin(), p.before.end() - 8);
  d.base = shorter;
  auto short_base = decode(*container, d);
  ASSERT_FALSE(short_base.ok());
  EXPECT_NE(short_base.error().message.find("base snapshot has"), std::string::npos);
}

TEST(Container, DeltaFallsBackToPlanesForUnrelatedOrUnmatchedTensors) {
  auto before = mixed_tensors(6);
  auto after = mixed_tensors(7);  // every value redrawn: nothing to gain from the base
  after.push_back({{"new.tensor", DType::kF32, {8}}, Bytes(32, 1)});
  EncodeOptions delta;
  delta.codec = Codec::kDelta;
  Bytes base = to_canonical(before), next = to_canonical(after);
  delta.base = base;
  auto container = encode(next, delta);
  ASSERT_TRUE(container.ok()) << container.error().message;
  auto info = read_container_info(*container);
  ASSERT_TRUE(info.ok());
  for (const SectionInfo& s : info->sections) {
    if (s.name == "new.tensor") {
      EXPECT_EQ(s.method, Method::kPlanes) << s.label();
    }
  }
  DecodeOptions d;
  d.base = base;
  auto back = decode(*container, d);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, next);
}

TEST(Container, RefusesInputsAndOptionsThatDoNotFit) {
  Bytes canonical = to_canonical(mixed_tensors(8));
  auto not_safetensors = encode(as_bytes("hello world, not a snapshot"), {});
  EXPECT_FALSE(not_safetensors.ok());

  EncodeOptions bad_chunk;
  bad_chunk.chunk_size = 1000;
  auto r1 = encode(canonical, bad_chunk);
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.error().message.find("chunk_size 1000"), std::string::npos);

  EncodeOptions bad_xz;
  bad_xz.codec = Codec::kXz;
  bad_xz.level = 12;
  EXPECT_FALSE(encode(canonical, bad_xz).ok());

  auto long_name = mixed_tensors(8);
  long_name[0].spec.name = std::string(1100, 'n');
  auto r3 = encode(to_canonical(long_name), {});
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.error().message.find("1024-byte limit"), std::string::npos) << r3.error().message;

  EncodeOptions delta_without_base;
  delta_without_base.codec = Codec::kDelta;
  EXPECT_FALSE(encode(canonical, delta_without_base).ok());

  auto container = encode(canonical, {});
  ASSERT_TRUE(container.ok());
  DecodeOptions with_base;
  with_base.base = canonical;
  auto r2 = decode(*container, with_base);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().message.find("this is a planes container"), std::string::npos);
}

TEST(Container, CallerSuppliedRootIsWhatTheDecoderChecks) {
  Bytes canonical = to_canonical(mixed_tensors(9));
  EncodeOptions eo;
  eo.root = Digest{};  // a wrong root: the container is then undecodable, and says so
  auto container = encode(canonical, eo);
  ASSERT_TRUE(container.ok());
  auto r = decode(*container, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("Merkle root"), std::string::npos) << r.error().message;
  DecodeOptions no_root;
  no_root.verify_root = false;
  auto unchecked = decode(*container, no_root);
  ASSERT_TRUE(unchecked.ok());
  EXPECT_EQ(*unchecked, canonical);
}

}  // namespace
}  // namespace vt::comp
