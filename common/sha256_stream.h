#pragma once
// A deterministic random stream keyed by a byte prefix: block j = SHA-256(prefix || u64le j),
// read as consecutive little-endian u64 words (four per block). Fingerprint positions
// (fingerprint/sampling.h) and verifier challenges (verifier/policy/policy.h) both draw from it,
// each with its own domain-separated prefix; its outputs are part of both formats.

#include <cstdint>

#include "common/bytes.h"

namespace vt {

class Sha256Stream {
 public:
  explicit Sha256Stream(Bytes prefix) : prefix_(std::move(prefix)) {}

  std::uint64_t next_u64();
  // Uniform in [0, bound) by rejection: words >= 2^64 - (2^64 mod bound) are skipped, the rest
  // taken mod bound, so no value is favoured. bound must be >= 1.
  std::uint64_t uniform(std::uint64_t bound);
  // Uniform in [0, 1): the top 53 bits of one word.
  double uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

 private:
  Bytes prefix_;
  std::uint64_t counter_ = 0;
  Digest block_{};
  std::size_t used_ = sizeof(Digest);  // bytes of block_ consumed; a full block forces the next
};

}  // namespace vt
