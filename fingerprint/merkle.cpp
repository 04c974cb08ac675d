#include "fingerprint/merkle.h"

#include <algorithm>

#include "common/sha256.h"
#include "common/thread_pool.h"

namespace vt::fp {
namespace {

constexpr std::uint8_t kLeafPrefix = 0x00;
constexpr std::uint8_t kNodePrefix = 0x01;

ByteSpan chunk_of(ByteSpan bytes, std::uint64_t i) {
  std::uint64_t begin = i * kMerkleChunkSize;
  return bytes.subspan(begin, std::min<std::uint64_t>(kMerkleChunkSize, bytes.size() - begin));
}

std::vector<Digest> leaf_hashes(ByteSpan bytes, ThreadPool* pool) {
  std::vector<Digest> leaves(merkle_chunk_count(bytes.size()));
  if (pool != nullptr && pool->size() > 0 && leaves.size() > 1) {
    pool->parallel_for(leaves.size(),
                       [&](std::size_t i) { leaves[i] = merkle_leaf_hash(chunk_of(bytes, i)); });
  } else {
    // One context for every leaf: EVP_MD_CTX_new per MiB is cheap, but not free on small inputs.
    Sha256 h;
    const std::uint8_t prefix = kLeafPrefix;
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      leaves[i] = h.update(ByteSpan(&prefix, 1)).update(chunk_of(bytes, i)).finish();
    }
  }
  return leaves;
}

// Replaces `level` by the level above it; a trailing odd node moves up unchanged.
void reduce_level(std::vector<Digest>& level) {
  std::size_t out = 0;
  for (std::size_t i = 0; i + 1 < level.size(); i += 2)
    level[out++] = merkle_node_hash(level[i], level[i + 1]);
  if (level.size() % 2 == 1) level[out++] = level.back();
  level.resize(out);
}

}  // namespace

Digest merkle_leaf_hash(ByteSpan chunk) {
  const std::uint8_t prefix = kLeafPrefix;
  Sha256 h;
  return h.update(ByteSpan(&prefix, 1)).update(chunk).finish();
}

Digest merkle_node_hash(const Digest& left, const Digest& right) {
  std::uint8_t buf[1 + 2 * sizeof(Digest)];
  buf[0] = kNodePrefix;
  std::copy(left.begin(), left.end(), buf + 1);
  std::copy(right.begin(), right.end(), buf + 1 + sizeof(Digest));
  return sha256(ByteSpan(buf, sizeof(buf)));
}

Digest merkle_root(ByteSpan bytes, ThreadPool* pool) {
  if (bytes.empty()) return sha256(ByteSpan());
  std::vector<Digest> level = leaf_hashes(bytes, pool);
  while (level.size() > 1) reduce_level(level);
  return level[0];
}

Result<InclusionProof> prove_chunk(ByteSpan bytes, std::uint64_t chunk_index, ThreadPool* pool) {
  const std::uint64_t count = merkle_chunk_count(bytes.size());
  if (chunk_index >= count) {
    return invalid_input("merkle proof: chunk " + std::to_string(chunk_index) +
                         " does not exist; " + std::to_string(bytes.size()) + " bytes have " +
                         std::to_string(count) + " chunks");
  }
  InclusionProof proof{chunk_index, count, {}};
  std::vector<Digest> level = leaf_hashes(bytes, pool);
  for (std::uint64_t idx = chunk_index; level.size() > 1; idx /= 2) {
    std::uint64_t sibling = idx ^ 1;
    if (sibling < level.size()) proof.siblings.push_back(level[sibling]);
    reduce_level(level);
  }
  return proof;
}

bool verify_chunk(const Digest& root, ByteSpan chunk, const InclusionProof& proof) {
  const std::uint64_t count = proof.chunk_count;
  std::uint64_t idx = proof.chunk_index;
  if (idx >= count) return false;
  const bool last = idx + 1 == count;
  if (chunk.size() > kMerkleChunkSize || chunk.empty() ||
      (!last && chunk.size() != kMerkleChunkSize)) {
    return false;
  }
  Digest h = merkle_leaf_hash(chunk);
  std::size_t used = 0;
  for (std::uint64_t n = count; n > 1; n = (n + 1) / 2, idx /= 2) {
    if (idx % 2 == 1) {
      if (used == proof.siblings.size()) return false;
      h = merkle_node_hash(proof.siblings[used++], h);
    } else if (idx + 1 < n) {
      if (used == proof.siblings.size()) return false;
      h = merkle_node_hash(h, proof.siblings[used++]);
    }  // else: the odd node at the end of its level, promoted without a sibling
  }
  return used == proof.siblings.size() && h == root;
}

}  // namespace vt::fp
