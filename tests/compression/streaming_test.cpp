// The streaming coder and reader (compression/streaming.h) against the whole-buffer ones: the
// same container bytes for every window size, codec and base, and reads of any range back.
#include "compression/streaming.h"

#include <gtest/gtest.h>

#include <cstring>

#include "common/file_io.h"
#include "common/thread_pool.h"
#include "fingerprint/merkle.h"
#include "tests/compression/test_states.h"
#include "tests/test_util.h"

namespace vt::comp {
namespace {

using testing::mixed_tensors;
using testing::to_canonical;

// mixed_tensors plus a 2.5 MiB tensor, so that the snapshot has several 1 MiB Merkle leaves and
// windows end inside them.
std::vector<testing::OwnedTensor> large_state(std::uint64_t seed) {
  std::vector<testing::OwnedTensor> t = mixed_tensors(seed);
  std::mt19937_64 rng(seed + 100);
  t.push_back({{"large.weight", DType::kF32, {655360}}, testing::gaussian_f32(655360, 0.05, rng)});
  return t;
}

RangeReader reader_of(const Bytes& bytes) {
  return [&bytes](std::uint64_t offset, std::span<std::uint8_t> out) -> Status {
    if (offset > bytes.size() || out.size() > bytes.size() - offset)
      return invalid_input("read past the test state");
    std::memcpy(out.data(), bytes.data() + offset, out.size());
    return {};
  };
}

CanonicalLayout layout_of(const Bytes& canonical) {
  auto view = parse_safetensors(canonical);
  EXPECT_TRUE(view.ok());
  CanonicalLayout layout;
  layout.prefix.assign(canonical.begin(),
                       canonical.begin() + static_cast<std::ptrdiff_t>(view->data_start));
  layout.tensors = view->tensors;
  layout.total_size = canonical.size();
  return layout;
}

Result<Bytes> streamed(const ::vt::testing::ScratchDir& dir, const Bytes& canonical,
                       const Bytes* base, EncodeOptions o, std::uint64_t window,
                       Digest* root = nullptr) {
  std::optional<StreamBase> b;
  if (base != nullptr) {
    VT_ASSIGN_OR_RETURN(StreamBase opened,
                        stream_base(base->size(), fp::merkle_root(*base), reader_of(*base)));
    b = std::move(opened);
  }
  VT_ASSIGN_OR_RETURN(StreamFileWriter out, StreamFileWriter::create(dir.path(), "s.vtc"));
  VT_ASSIGN_OR_RETURN(StreamedContainer c,
                      encode_streamed(layout_of(canonical), reader_of(canonical), b ? &*b : nullptr,
                                      o, out, window));
  if (root != nullptr) *root = c.root;
  VT_RETURN_IF_ERROR(out.commit(dir / "s.vtc"));
  return read_file(dir / "s.vtc");
}

TEST(Streaming, WritesTheContainerEncodeWritesForEveryWindowAndCodec) {
  ::vt::testing::ScratchDir dir;
  const Bytes canonical = to_canonical(large_state(1));
  ThreadPool pool(2);
  for (Codec codec : {Codec::kRaw, Codec::kZstd, Codec::kPlanes, Codec::kXz}) {
    for (std::uint64_t chunk : {std::uint64_t{4096}, std::uint64_t{1} << 20}) {
      if (codec == Codec::kXz && chunk == 4096) continue;  // slow, and the same plan as zstd's
      for (std::uint64_t window : {std::uint64_t{1}, std::uint64_t{5000}, std::uint64_t{1} << 20,
                                   std::uint64_t{64} << 20}) {
        if (codec == Codec::kXz && window != 5000) continue;
        EncodeOptions o;
        o.codec = codec;
        o.chunk_size = chunk;
        o.pool = &pool;
        auto whole = encode(canonical, o);
        ASSERT_TRUE(whole.ok()) << whole.error().message;
        Digest root{};
        auto pieces = streamed(dir, canonical, nullptr, o, window, &root);
        ASSERT_TRUE(pieces.ok()) << pieces.error().message;
        EXPECT_EQ(*pieces, *whole)
            << codec_name(codec) << " chunk " << chunk << " window " << window;
        EXPECT_EQ(root, fp::merkle_root(canonical));
      }
    }
  }
}

TEST(Streaming, ADeltaAgainstABaseReadInPiecesIsTheDeltaEncodeWrites) {
  ::vt::testing::ScratchDir dir;
  std::vector<testing::OwnedTensor> before = large_state(2);
  const Bytes base = to_canonical(before);
  testing::perturb_f32(before, 1e-3, 0.3, 7);
  const Bytes after = to_canonical(before);
  EncodeOptions o;
  o.codec = Codec::kDelta;
  o.chunk_size = 8192;
  o.base = base;
  auto whole = encode(after, o);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  o.base = {};
  auto pieces = streamed(dir, after, &base, o, 100000);
  ASSERT_TRUE(pieces.ok()) << pieces.error().message;
  EXPECT_EQ(*pieces, *whole);
  // Without a base the delta codec is refused, as encode refuses it.
  auto refused = streamed(dir, after, nullptr, o, 100000);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("base"), std::string::npos);
}

TEST(Streaming, AContainerFileReadsAnyRangeThroughItsDeltaChain) {
  ::vt::testing::ScratchDir dir;
  std::vector<testing::OwnedTensor> tensors = large_state(3);
  const Bytes base = to_canonical(tensors);
  testing::perturb_f32(tensors, 1e-3, 0.5, 9);
  const Bytes after = to_canonical(tensors);
  EncodeOptions full;
  full.chunk_size = 4096;
  ASSERT_TRUE(write_file_atomic(dir / "base.vtc", *encode(base, full)).ok());
  EncodeOptions delta = full;
  delta.codec = Codec::kDelta;
  delta.base = base;
  ASSERT_TRUE(write_file_atomic(dir / "after.vtc", *encode(after, delta)).ok());

  auto base_file = ContainerFile::open(dir / "base.vtc", 1u << 30);
  auto after_file = ContainerFile::open(dir / "after.vtc", 1u << 30);
  ASSERT_TRUE(base_file.ok() && after_file.ok());
  EXPECT_EQ((*after_file)->info().base_root, fp::merkle_root(base));
  Bytes out(3);
  auto unset = (*after_file)->read(after.size() - 3, out);  // a delta section, no base yet
  ASSERT_FALSE(unset.ok());
  (*after_file)->set_base((*base_file)->reader());
  std::mt19937_64 rng(5);
  for (int i = 0; i < 200; ++i) {
    const std::uint64_t at = rng() % after.size();
    const std::uint64_t n = std::min<std::uint64_t>(after.size() - at, rng() % 20000);
    Bytes got(n);
    ASSERT_TRUE((*after_file)->read(at, got).ok()) << at << " + " << n;
    ASSERT_TRUE(std::equal(got.begin(), got.end(), after.begin() + static_cast<std::ptrdiff_t>(at)))
        << at << " + " << n;
  }
  Bytes all(after.size());
  ASSERT_TRUE((*after_file)->read(0, all).ok());
  EXPECT_EQ(all, after);
  ThreadPool pool(2);
  auto whole = read_whole(**after_file, &pool);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  EXPECT_EQ(*whole, after);
  EXPECT_TRUE(check_whole(**after_file, &pool).ok());
  EXPECT_TRUE(check_whole(**after_file, nullptr).ok());
}

TEST(Streaming, AContainerFileNamesCorruptionAndRefusesATruncatedOrOversizedFile) {
  ::vt::testing::ScratchDir dir;
  const Bytes canonical = to_canonical(large_state(4));
  EncodeOptions o;
  o.chunk_size = 4096;
  Bytes container = *encode(canonical, o);
  auto info = read_container_info(container);
  ASSERT_TRUE(info.ok());
  const SectionInfo& last = info->sections.back();
  Bytes flipped = container;
  flipped[last.payload_offset + last.payload_size / 2] ^= 0x10;
  ASSERT_TRUE(write_file_atomic(dir / "flipped.vtc", flipped).ok());
  auto file = ContainerFile::open(dir / "flipped.vtc", 1u << 30);
  ASSERT_TRUE(file.ok()) << file.error().message;  // the head is intact
  Bytes out(last.raw_size);
  auto bad = (*file)->read(last.raw_offset, out);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("corrupted"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find(last.label()), std::string::npos) << bad.error().message;
  auto whole = read_whole(**file, nullptr);
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.error().message.find("corrupted"), std::string::npos) << whole.error().message;
  ThreadPool pool(2);
  auto checked = check_whole(**file, &pool);
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(checked.error().message.find(last.label()), std::string::npos)
      << checked.error().message;

  Bytes truncated(container.begin(), container.end() - 1);
  ASSERT_TRUE(write_file_atomic(dir / "short.vtc", truncated).ok());
  auto short_file = ContainerFile::open(dir / "short.vtc", 1u << 30);
  ASSERT_FALSE(short_file.ok());
  EXPECT_NE(short_file.error().message.find("truncated"), std::string::npos)
      << short_file.error().message;

  ASSERT_TRUE(write_file_atomic(dir / "ok.vtc", container).ok());
  auto too_big = ContainerFile::open(dir / "ok.vtc", canonical.size() - 1);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.error().message.find("above the limit"), std::string::npos);
}

TEST(Streaming, AWriterDroppedUncommittedLeavesNothing) {
  ::vt::testing::ScratchDir dir;
  {
    auto w = StreamFileWriter::create(dir.path(), "x.vtc");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->append(Bytes(100, 1)).ok());
    EXPECT_FALSE(w->write_at(90, Bytes(20, 2)).ok());  // past what was appended
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace vt::comp
