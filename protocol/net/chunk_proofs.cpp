#include "protocol/net/chunk_proofs.h"

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
  return fp::prove_chunks(bytes, indices, fp::kMerkleChunkSize, pool);
}

}  // namespace vt::wire
