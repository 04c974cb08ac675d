#include "common/sha256_stream.h"

#include "common/sha256.h"

namespace vt {

std::uint64_t Sha256Stream::next_u64() {
  if (used_ == sizeof(Digest)) {
    Sha256 h;
    std::uint8_t counter[8];
    put_u64le(counter, counter_++);
    block_ = h.update(ByteSpan(prefix_)).update(ByteSpan(counter, 8)).finish();
    used_ = 0;
  }
  const std::uint64_t w = get_u64le(block_.data() + used_);
  used_ += 8;
  return w;
}

std::uint64_t Sha256Stream::uniform(std::uint64_t bound) {
  // 2^64 mod bound, computed in 64 bits: (2^64 - bound) mod bound.
  const std::uint64_t excess = (0 - bound) % bound;
  for (;;) {
    const std::uint64_t w = next_u64();
    if (excess == 0 || w < 0 - excess) return w % bound;
  }
}

}  // namespace vt
