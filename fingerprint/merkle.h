#pragma once
// Merkle commitments over canonical snapshot bytes (docs/fingerprint.md): SHA-256, fixed
// 1 MiB leaves, RFC 6962 domain separation (leaf = H(0x00 || chunk), node = H(0x01 || l || r)).
//
// Chunk i is bytes [i * 1 MiB, min((i + 1) * 1 MiB, size)); a byte string of size s has
// ceil(s / 1 MiB) chunks. The tree is built level by level, pairing neighbours left to right;
// a node left without a partner at the end of a level moves up unchanged. This is the tree of
// RFC 6962 section 2.1 (split at the largest power of two below n), so no node is ever hashed
// with itself and (a) and (a, a) have different roots. The empty byte string has no chunks
// and its root is SHA-256 of nothing, as in RFC 6962.

#include <cstdint>
#include <vector>

#include "common/bytes.h"

namespace vt {
class ThreadPool;
}

namespace vt::fp {

inline constexpr std::size_t kMerkleChunkSize = 1u << 20;

inline std::uint64_t merkle_chunk_count(std::uint64_t size) {
  return (size + kMerkleChunkSize - 1) / kMerkleChunkSize;
}

Digest merkle_leaf_hash(ByteSpan chunk);                           // H(0x00 || chunk)
Digest merkle_node_hash(const Digest& left, const Digest& right);  // H(0x01 || left || right)

// Root over `bytes`; hashes leaves on `pool` when given.
Digest merkle_root(ByteSpan bytes, ThreadPool* pool = nullptr);

struct InclusionProof {
  std::uint64_t chunk_index = 0;
  std::uint64_t chunk_count = 0;
  std::vector<Digest> siblings;  // from the leaf level upwards; promoted levels have none
};

// Fails (invalid input) when chunk_index is not below the number of chunks.
Result<InclusionProof> prove_chunk(ByteSpan bytes, std::uint64_t chunk_index,
                                   ThreadPool* pool = nullptr);
// True iff `chunk` is chunk `proof.chunk_index` of a byte string whose root is `root`. Also
// checks the chunk's length: every chunk but the last is exactly 1 MiB, the last 1..1 MiB.
bool verify_chunk(const Digest& root, ByteSpan chunk, const InclusionProof& proof);

}  // namespace vt::fp
