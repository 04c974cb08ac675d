#include "fingerprint/merkle.h"

#include <gtest/gtest.h>

#include "common/sha256.h"
#include "common/thread_pool.h"

namespace vt::fp {
namespace {

constexpr std::size_t kMiB = kMerkleChunkSize;

Bytes pattern(std::size_t n, std::uint32_t seed = 1) {
  Bytes out(n);
  std::uint32_t x = seed;
  for (auto& b : out) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return out;
}

// RFC 6962 section 2.1 literally: split at the largest power of two below n.
Digest rfc6962_root(const std::vector<Digest>& leaves, std::size_t lo, std::size_t hi) {
  if (hi - lo == 1) return leaves[lo];
  std::size_t k = 1;
  while (k * 2 < hi - lo) k *= 2;
  return merkle_node_hash(rfc6962_root(leaves, lo, lo + k), rfc6962_root(leaves, lo + k, hi));
}

TEST(Merkle, EmptyInputIsSha256OfNothing) {
  EXPECT_EQ(hex_encode(merkle_root({})),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_FALSE(prove_chunk({}, 0).ok());
}

TEST(Merkle, SingleChunkRootIsLeafHash) {
  Bytes data = pattern(1000);
  Bytes prefixed{0x00};
  append_bytes(prefixed, data);
  EXPECT_EQ(merkle_root(data), sha256(prefixed));
}

TEST(Merkle, MatchesRfc6962SplitForEveryShapeUpTo11Chunks) {
  ThreadPool pool(3);
  Bytes data = pattern(11 * kMiB);
  for (std::size_t n = 1; n <= 11; ++n) {
    for (std::size_t tail : {std::size_t{0}, std::size_t{1}, kMiB - 1}) {
      std::size_t size = (n - 1) * kMiB + (tail == 0 ? kMiB : tail);
      ByteSpan bytes(data.data(), size);
      std::vector<Digest> leaves;
      for (std::size_t i = 0; i < n; ++i) {
        leaves.push_back(
            merkle_leaf_hash(bytes.subspan(i * kMiB, std::min(kMiB, size - i * kMiB))));
      }
      Digest expected = rfc6962_root(leaves, 0, n);
      EXPECT_EQ(merkle_root(bytes), expected) << n << " chunks, size " << size;
      EXPECT_EQ(merkle_root(bytes, &pool), expected) << n << " chunks, size " << size;
    }
  }
}

TEST(Merkle, AnySingleFlippedBitChangesTheRoot) {
  Bytes data = pattern(3 * kMiB + 12345);
  const Digest root = merkle_root(data);
  // Every bit of the first and last bytes of every chunk, plus a spread of interior positions.
  std::vector<std::size_t> positions;
  for (std::size_t c = 0; c < 4; ++c) {
    positions.push_back(c * kMiB);
    positions.push_back(std::min(data.size(), (c + 1) * kMiB) - 1);
  }
  for (std::size_t p = 7; p < data.size(); p += 99991) positions.push_back(p);
  for (std::size_t p : positions) {
    for (int bit = 0; bit < 8; ++bit) {
      data[p] ^= static_cast<std::uint8_t>(1u << bit);
      EXPECT_NE(merkle_root(data), root) << "byte " << p << " bit " << bit;
      data[p] ^= static_cast<std::uint8_t>(1u << bit);
    }
  }
  EXPECT_EQ(merkle_root(data), root);
}

TEST(Merkle, DuplicatedLastChunkChangesTheRoot) {
  // The Bitcoin-style "duplicate the odd node" rule would make these two collide.
  Bytes three = pattern(3 * kMiB);
  Bytes four = three;
  four.insert(four.end(), three.end() - kMiB, three.end());
  EXPECT_NE(merkle_root(three), merkle_root(four));
}

TEST(Merkle, ProofsVerifyForEveryChunkAndOnlyThatChunk) {
  ThreadPool pool(2);
  for (std::size_t n : {1u, 2u, 3u, 5u, 7u}) {
    Bytes data = pattern((n - 1) * kMiB + 777, static_cast<std::uint32_t>(n));
    const Digest root = merkle_root(data, &pool);
    auto chunk = [&](std::size_t i) {
      return ByteSpan(data).subspan(i * kMiB, std::min(kMiB, data.size() - i * kMiB));
    };
    for (std::size_t i = 0; i < n; ++i) {
      auto proof = prove_chunk(data, i, &pool);
      ASSERT_TRUE(proof.ok()) << proof.error().message;
      EXPECT_EQ(proof->chunk_count, n);
      EXPECT_TRUE(verify_chunk(root, chunk(i), *proof)) << "n=" << n << " i=" << i;
      for (std::size_t j = 0; j < n; ++j) {
        if (j == i) continue;
        EXPECT_FALSE(verify_chunk(root, chunk(j), *proof)) << "n=" << n << " i=" << i << " j=" << j;
      }
      Bytes modified(chunk(i).begin(), chunk(i).end());
      modified[modified.size() / 2] ^= 0x10;
      EXPECT_FALSE(verify_chunk(root, modified, *proof));
      InclusionProof moved = *proof;
      moved.chunk_index = (i + 1) % n;
      if (n > 1) {
        EXPECT_FALSE(verify_chunk(root, chunk(i), moved));
      }
      if (!proof->siblings.empty()) {
        InclusionProof bad = *proof;
        bad.siblings[0][0] ^= 1;
        EXPECT_FALSE(verify_chunk(root, chunk(i), bad));
        bad = *proof;
        bad.siblings.pop_back();
        EXPECT_FALSE(verify_chunk(root, chunk(i), bad));
      }
      InclusionProof extra = *proof;
      extra.siblings.push_back(root);
      EXPECT_FALSE(verify_chunk(root, chunk(i), extra));
    }
    auto missing = prove_chunk(data, n);
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("chunk " + std::to_string(n) + " does not exist"),
              std::string::npos)
        << missing.error().message;
  }
}

TEST(Merkle, ShortNonLastChunkIsRejected) {
  Bytes data = pattern(2 * kMiB + 5);
  const Digest root = merkle_root(data);
  auto proof = prove_chunk(data, 0);
  ASSERT_TRUE(proof.ok());
  EXPECT_FALSE(verify_chunk(root, ByteSpan(data).first(kMiB - 1), *proof));
}

// A snapshot hashed as it streams past, in pieces of any size, has the root of the whole.
TEST(Merkle, ABuilderFedInPiecesGivesTheRootOfTheWhole) {
  ThreadPool pool(2);
  for (std::size_t size :
       {std::size_t{0}, std::size_t{1}, kMiB - 1, kMiB, kMiB + 1, 3 * kMiB + 12345}) {
    const Bytes data = pattern(size, 7);
    for (std::size_t piece : {std::size_t{1000}, kMiB - 3, kMiB, 2 * kMiB + 1}) {
      if (piece == 1000 && size > kMiB + 1) continue;  // a thousand pieces are enough
      MerkleBuilder builder;
      for (std::size_t at = 0; at < size; at += piece)
        builder.append(ByteSpan(data).subspan(at, std::min(piece, size - at)), &pool);
      EXPECT_EQ(builder.size(), size);
      EXPECT_EQ(builder.finish(), merkle_root(data)) << size << " in pieces of " << piece;
    }
  }
}

}  // namespace
}  // namespace vt::fp
