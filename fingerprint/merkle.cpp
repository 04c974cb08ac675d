#include "fingerprint/merkle.h"

#include <algorithm>
#include <cassert>

#include "common/sha256.h"
#include "common/thread_pool.h"

namespace vt::fp {
namespace {

constexpr std::uint8_t kLeafPrefix = 0x00;
constexpr std::uint8_t kNodePrefix = 0x01;

ByteSpan chunk_of(ByteSpan bytes, std::uint64_t i, std::size_t chunk_size) {
  std::uint64_t begin = i * chunk_size;
  return bytes.subspan(begin, std::min<std::uint64_t>(chunk_size, bytes.size() - begin));
}

std::vector<Digest> leaf_hashes(ByteSpan bytes, std::size_t chunk_size, ThreadPool* pool) {
  std::vector<Digest> leaves(merkle_chunk_count(bytes.size(), chunk_size));
  const auto leaf = [&](std::size_t i) {
    leaves[i] = merkle_leaf_hash(chunk_of(bytes, i, chunk_size));
  };
  if (pool != nullptr && pool->size() > 0 && leaves.size() > 1) {
    pool->parallel_for(leaves.size(), leaf);
  } else {
    for (std::size_t i = 0; i < leaves.size(); ++i) leaf(i);
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
  return sha256_of_parts({ByteSpan(&prefix, 1), chunk});
}

Digest merkle_node_hash(const Digest& left, const Digest& right) {
  const std::uint8_t prefix = kNodePrefix;
  return sha256_of_parts({ByteSpan(&prefix, 1), ByteSpan(left), ByteSpan(right)});
}

Digest merkle_root(ByteSpan bytes, ThreadPool* pool) {
  return merkle_root(bytes, kMerkleChunkSize, pool);
}

Digest merkle_root(ByteSpan bytes, std::size_t chunk_size, ThreadPool* pool) {
  if (bytes.empty()) return sha256(ByteSpan());
  std::vector<Digest> level = leaf_hashes(bytes, chunk_size, pool);
  while (level.size() > 1) reduce_level(level);
  return level[0];
}

void MerkleBuilder::append(ByteSpan bytes, ThreadPool* pool) {
  size_ += bytes.size();
  if (!partial_.empty()) {
    const std::size_t take = std::min(chunk_size_ - partial_.size(), bytes.size());
    partial_.insert(partial_.end(), bytes.begin(),
                    bytes.begin() + static_cast<std::ptrdiff_t>(take));
    bytes = bytes.subspan(take);
    if (partial_.size() < chunk_size_) return;
    leaves_.push_back(merkle_leaf_hash(partial_));
    partial_.clear();
  }
  const std::size_t whole = bytes.size() / chunk_size_ * chunk_size_;
  if (whole > 0) {
    std::vector<Digest> more = leaf_hashes(bytes.first(whole), chunk_size_, pool);
    leaves_.insert(leaves_.end(), more.begin(), more.end());
  }
  partial_.assign(bytes.begin() + static_cast<std::ptrdiff_t>(whole), bytes.end());
}

Digest MerkleBuilder::finish() {
  if (!partial_.empty()) leaves_.push_back(merkle_leaf_hash(partial_));
  partial_.clear();
  if (leaves_.empty()) return sha256(ByteSpan());
  std::vector<Digest> level = std::move(leaves_);
  leaves_.clear();
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
  const std::uint64_t indices[] = {chunk_index};
  return std::move(prove_chunks(bytes, indices, kMerkleChunkSize, pool)[0]);
}

std::vector<InclusionProof> prove_chunks(ByteSpan bytes, std::span<const std::uint64_t> indices,
                                         std::size_t chunk_size, ThreadPool* pool) {
  const std::uint64_t count = merkle_chunk_count(bytes.size(), chunk_size);
  // levels[0] are the leaves; each next level as reduce_level makes it.
  std::vector<std::vector<Digest>> levels{leaf_hashes(bytes, chunk_size, pool)};
  while (levels.back().size() > 1) {
    std::vector<Digest> above = levels.back();
    reduce_level(above);
    levels.push_back(std::move(above));
  }
  std::vector<InclusionProof> proofs;
  proofs.reserve(indices.size());
  for (std::uint64_t index : indices) {
    assert(index < count);
    InclusionProof proof{index, count, {}};
    std::uint64_t idx = index;
    for (std::size_t l = 0; l + 1 < levels.size(); ++l, idx /= 2) {
      const std::uint64_t sibling = idx ^ 1;
      if (sibling < levels[l].size()) proof.siblings.push_back(levels[l][sibling]);
    }
    proofs.push_back(std::move(proof));
  }
  return proofs;
}

bool verify_chunk(const Digest& root, ByteSpan chunk, const InclusionProof& proof,
                  std::size_t chunk_size) {
  const std::uint64_t count = proof.chunk_count;
  std::uint64_t idx = proof.chunk_index;
  if (idx >= count) return false;
  const bool last = idx + 1 == count;
  if (chunk.size() > chunk_size || chunk.empty() || (!last && chunk.size() != chunk_size)) {
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
