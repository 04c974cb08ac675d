#pragma once
// Merkle commitments over byte strings (docs/fingerprint.md): SHA-256, fixed-size leaves, RFC
// 6962 domain separation (leaf = H(0x00 || chunk), node = H(0x01 || l || r)). Snapshots use 1 MiB
// leaves; a step trace's operands (docs/dispute.md) use 1 KiB leaves, so that one value can be
// shown with a kilobyte and a short proof.
//
// With leaves of L bytes, chunk i is bytes [i * L, min((i + 1) * L, size)); a byte string of
// size s has ceil(s / L) chunks. The tree is built level by level, pairing neighbours left to
// right; a node left without a partner at the end of a level moves up unchanged. This is the tree
// of RFC 6962 section 2.1 (split at the largest power of two below n), so no node is ever hashed
// with itself and (a) and (a, a) have different roots. The empty byte string has no chunks
// and its root is SHA-256 of nothing, as in RFC 6962.

#include <cstdint>
#include <span>
#include <vector>

#include "common/bytes.h"

namespace vt {
class ThreadPool;
}

namespace vt::fp {

inline constexpr std::size_t kMerkleChunkSize = 1u << 20;

inline std::uint64_t merkle_chunk_count(std::uint64_t size,
                                        std::size_t chunk_size = kMerkleChunkSize) {
  return (size + chunk_size - 1) / chunk_size;
}

Digest merkle_leaf_hash(ByteSpan chunk);                           // H(0x00 || chunk)
Digest merkle_node_hash(const Digest& left, const Digest& right);  // H(0x01 || left || right)

// Root over `bytes`; hashes leaves on `pool` when given.
Digest merkle_root(ByteSpan bytes, ThreadPool* pool = nullptr);
Digest merkle_root(ByteSpan bytes, std::size_t chunk_size, ThreadPool* pool = nullptr);

// The root of a byte string fed in order, piece by piece, that is never whole in memory: a
// snapshot read out of the live tensors a window at a time. Holds one partial leaf and the leaf
// hashes (32 bytes per MiB); finish() gives merkle_root's root of the concatenation.
class MerkleBuilder {
 public:
  explicit MerkleBuilder(std::size_t chunk_size = kMerkleChunkSize) : chunk_size_(chunk_size) {}
  // Hashes the whole leaves in `bytes` (on `pool` when given) and keeps the rest for the next.
  void append(ByteSpan bytes, ThreadPool* pool = nullptr);
  std::uint64_t size() const { return size_; }
  Digest finish();

 private:
  std::size_t chunk_size_;
  std::uint64_t size_ = 0;
  Bytes partial_;  // the start of the next leaf, shorter than a leaf
  std::vector<Digest> leaves_;
};

struct InclusionProof {
  std::uint64_t chunk_index = 0;
  std::uint64_t chunk_count = 0;
  std::vector<Digest> siblings;  // from the leaf level upwards; promoted levels have none
};

// Fails (invalid input) when chunk_index is not below the number of chunks.
Result<InclusionProof> prove_chunk(ByteSpan bytes, std::uint64_t chunk_index,
                                   ThreadPool* pool = nullptr);
// The proofs of several chunks, the tree built once; every index must be below the number of
// chunks (the caller checks: this asserts it).
std::vector<InclusionProof> prove_chunks(ByteSpan bytes, std::span<const std::uint64_t> indices,
                                         std::size_t chunk_size = kMerkleChunkSize,
                                         ThreadPool* pool = nullptr);
// True iff `chunk` is chunk `proof.chunk_index` of a byte string whose root is `root`. Also
// checks the chunk's length: every chunk but the last is exactly chunk_size bytes, the last
// 1..chunk_size.
bool verify_chunk(const Digest& root, ByteSpan chunk, const InclusionProof& proof,
                  std::size_t chunk_size = kMerkleChunkSize);

}  // namespace vt::fp
