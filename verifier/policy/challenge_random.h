#pragma once
// The challenge policy's secret randomness (docs/plan.md).
//
// Randomness. Every draw reads one stream: block j = SHA-256("veritrain/challenge/v1" || seed
// || u64le j), consumed as consecutive little-endian u64 words; a uniform in [0, 1) is the top
// 53 bits of one word times 2^−53. Epoch e (1..N, in order) is challenged iff its word's
// uniform < p_e. The fallback epoch is 1 + uniform(N) by rejection (Sha256Stream, as
// fp::PrfStream). The seed is 32 bytes from the OS CSPRNG (OpenSSL RAND_bytes) and never written
// anywhere, or the bytes of `--seed HEX` when a run is to be reproduced (and then recorded in the
// plan).

#include <cstdint>
#include <string>
#include <string_view>

#include "common/bytes.h"
#include "common/result.h"
#include "common/sha256_stream.h"

namespace vt::verifier {

// The seed of a reproducible run or a fresh secret one, and the stream described above.
class ChallengeRandom {
 public:
  // 32 bytes from RAND_bytes. Errors (I/O) if the CSPRNG cannot be read.
  static Result<ChallengeRandom> from_os();
  // 1..64 bytes as hex; errors name `--seed`.
  static Result<ChallengeRandom> from_seed_hex(std::string_view hex);

  std::uint64_t next_u64() { return stream_.next_u64(); }
  double uniform01() { return stream_.uniform01(); }  // [0, 1), 53 bits
  std::uint64_t uniform(std::uint64_t bound) {
    return stream_.uniform(bound);
  }  // [0, bound), bound ≥ 1
  // The seed as hex when it came from `--seed`; empty for an OS seed, which stays secret.
  const std::string& seed_hex() const { return seed_hex_; }

 private:
  ChallengeRandom(const Bytes& seed, std::string seed_hex);
  std::string seed_hex_;
  Sha256Stream stream_;  // keyed by "veritrain/challenge/v1" || seed
};

}  // namespace vt::verifier
