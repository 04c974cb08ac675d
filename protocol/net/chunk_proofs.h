#pragma once
// Inclusion proofs for many 1 MiB chunks of a snapshot at once. fp::prove_chunk hashes the whole
// string per call; a get_chunks request asks for up to dozens of chunks of a snapshot, so the
// server builds the tree once and reads every proof off it. The proofs are the ones
// fp::prove_chunk gives (tests/protocol/chunk_proofs_test.cpp checks that) and fp::verify_chunk
// accepts.

#include <cstdint>
#include <span>
#include <vector>

#include "fingerprint/merkle.h"

namespace vt::wire {

// Fails naming the first index that is not below the number of 1 MiB chunks of `bytes`.
Result<std::vector<fp::InclusionProof>> prove_chunks(ByteSpan bytes,
                                                     std::span<const std::uint64_t> indices,
                                                     ThreadPool* pool = nullptr);

}  // namespace vt::wire
