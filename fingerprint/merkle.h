#pragma once
// Merkle commitments over canonical snapshot bytes (docs/fingerprint.md): SHA-256, fixed
// 1 MiB leaves, RFC 6962 domain separation (leaf = H(0x00 || chunk), node = H(0x01 || l || r)).

#include <cstdint>
#include <vector>

#include "common/bytes.h"

namespace vt {
class ThreadPool;
}

namespace vt::fp {

inline constexpr std::size_t kMerkleChunkSize = 1u << 20;

// Root over `bytes`; hashes leaves on `pool` when given.
Digest merkle_root(ByteSpan bytes, ThreadPool* pool = nullptr);

struct InclusionProof {
  std::uint64_t chunk_index = 0;
  std::uint64_t chunk_count = 0;
  std::vector<Digest> siblings;  // from the leaf level upwards
};

Result<InclusionProof> prove_chunk(ByteSpan bytes, std::uint64_t chunk_index, ThreadPool* pool = nullptr);
// True iff `chunk` is chunk `proof.chunk_index` of a byte string whose root is `root`.
bool verify_chunk(const Digest& root, ByteSpan chunk, const InclusionProof& proof);

}  // namespace vt::fp
