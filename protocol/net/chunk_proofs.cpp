#include "protocol/net/chunk_proofs.h"

#include <algorithm>

#include "common/thread_pool.h"

namespace vt::wire {

Result<std::vector<fp::InclusionProof>> prove_chunks(ByteSpan bytes,
                                                     std::span<const std::uint64_t> indices,
                                                     ThreadPool* pool) {
  const std::uint64_t count = fp::merkle_chunk_count(bytes.size());
  for (std::uint64_t i : indices) {
    if (i >= count)
      return invalid_input("chunk " + std::to_string(i) + " does not exist: the snapshot has " +
                           std::to_string(count) + " chunks of 1 MiB (" +
                           std::to_string(bytes.size()) + " bytes)");
  }
  // levels[0] are the leaves; each next level pairs neighbours, promoting a trailing odd node,
  // exactly as fingerprint/merkle.cpp reduces them.
  std::vector<std::vector<Digest>> levels(1);
  levels[0].resize(count);
  auto leaf = [&](std::size_t i) {
    std::uint64_t begin = i * fp::kMerkleChunkSize;
    levels[0][i] = fp::merkle_leaf_hash(
        bytes.subspan(begin, std::min<std::uint64_t>(fp::kMerkleChunkSize, bytes.size() - begin)));
  };
  if (pool != nullptr && count > 1) {
    pool->parallel_for(count, leaf);
  } else {
    for (std::size_t i = 0; i < count; ++i) leaf(i);
  }
  while (levels.back().size() > 1) {
    const auto& below = levels.back();
    std::vector<Digest> above;
    above.reserve((below.size() + 1) / 2);
    for (std::size_t i = 0; i + 1 < below.size(); i += 2)
      above.push_back(fp::merkle_node_hash(below[i], below[i + 1]));
    if (below.size() % 2 == 1) above.push_back(below.back());
    levels.push_back(std::move(above));
  }
  std::vector<fp::InclusionProof> proofs;
  proofs.reserve(indices.size());
  for (std::uint64_t index : indices) {
    fp::InclusionProof proof{index, count, {}};
    std::uint64_t idx = index;
    for (std::size_t l = 0; l + 1 < levels.size(); ++l, idx /= 2) {
      std::uint64_t sibling = idx ^ 1;
      if (sibling < levels[l].size()) proof.siblings.push_back(levels[l][sibling]);
    }
    proofs.push_back(std::move(proof));
  }
  return proofs;
}

}  // namespace vt::wire
