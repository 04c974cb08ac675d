// Known answers for the stream fingerprint positions and verifier challenges draw from. The
// expected words were computed independently with Python's hashlib:
//   hashlib.sha256(b"veritrain/test/v1" + struct.pack("<Q", j)).digest(), read as "<4Q".
// A change here changes both formats.

#include "common/sha256_stream.h"

#include <gtest/gtest.h>

#include <set>

namespace vt {
namespace {

Sha256Stream test_stream() {
  const std::string_view prefix = "veritrain/test/v1";
  return Sha256Stream(Bytes(prefix.begin(), prefix.end()));
}

TEST(Sha256Stream, WordsAreTheBlocksReadLittleEndian) {
  Sha256Stream s = test_stream();
  const std::uint64_t expected[] = {
      16553501534892176041u, 1628140393023535624u, 14078866934079253701u, 16568297488832670043u,
      2198165558902841435u,  9895869707885053019u, 12819108235372430883u, 7520983252495991346u};
  for (std::uint64_t want : expected) EXPECT_EQ(s.next_u64(), want);
}

TEST(Sha256Stream, UniformRejectsTheBiasedTail) {
  Sha256Stream s = test_stream();
  // Words 0 mod 1000 in order; no word of these eight lies in the rejected tail for 1000.
  const std::uint64_t small[] = {41, 624, 701, 43, 435, 19};
  for (std::uint64_t want : small) EXPECT_EQ(s.uniform(1000), want);
  // For 2^63 + 1 every word >= 2^63 + 1 is skipped: words 0, 2, 3, 5 and 6 above are, so three
  // draws take words 1, 4 and 7 whole.
  Sha256Stream t = test_stream();
  const std::uint64_t bound = (1ull << 63) + 1;
  EXPECT_EQ(t.uniform(bound), 1628140393023535624u);
  EXPECT_EQ(t.uniform(bound), 2198165558902841435u);
  EXPECT_EQ(t.uniform(bound), 7520983252495991346u);
}

TEST(Sha256Stream, UniformCoversSmallBoundsAndOneIsZero) {
  Sha256Stream s = test_stream();
  EXPECT_EQ(s.uniform(1), 0u);
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 500; ++i) seen.insert(s.uniform(7));
  EXPECT_EQ(seen.size(), 7u);
}

TEST(Sha256Stream, Uniform01IsTheTop53Bits) {
  Sha256Stream s = test_stream();
  EXPECT_DOUBLE_EQ(s.uniform01(), 0.8973671163186114);
}

}  // namespace
}  // namespace vt
