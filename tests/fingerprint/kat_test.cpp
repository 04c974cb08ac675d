// Known-answer vectors of docs/fingerprint.md. reference/fingerprint_ref.py re-derives the
// snapshot ones (reference_test.cpp); a change here is a format change.

#include "tests/fingerprint/kat.h"

#include <gtest/gtest.h>

#include "common/json.h"
#include "fingerprint/fingerprint.h"
#include "fingerprint/merkle.h"

namespace vt::fp {
namespace {

TEST(KnownAnswer, MerkleRoots) {
  EXPECT_EQ(hex_encode(merkle_root(as_bytes("abc"))),
            "609f6e36d2405585188d5cfd761f407c7cc46a7d3f314c88270469dde315fcd1");
  EXPECT_EQ(hex_encode(merkle_root(kat::pattern(2 * kMerkleChunkSize + 1))),
            "13fc36052180d2af460b52104fd4480bfa9513d46e40b3efad05a2dd4c81d7ab");
  EXPECT_EQ(hex_encode(merkle_root(kat::pattern(5 * kMerkleChunkSize))),
            "d29b99aa97e0515d22db167911c23cd56d5e7e100a24ddc2e8816647b1d4d835");
}

TEST(KnownAnswer, Seeds) {
  const Digest root = merkle_root(as_bytes("abc"));
  EXPECT_EQ(hex_encode(commitment_seed(kat::task_id(), 5, root)),
            "eaa71fddbfc963498e0f26fd6527e61df3fff484be14b7b1a95e7011055be459");
  EXPECT_EQ(hex_encode(tracking_seed(kat::task_id())),
            "0a6047a222fda26fa218197955a851c73ca8a34a68291da5a0a462db6b120057");
  EXPECT_EQ(hex_encode(trail_seed(kat::task_id(), 2, 100)),
            "f2637ac56cbc321cfa855be645f72937d15a965162cf8c84d51e2ae3cb9d4eea");
  PrfStream prf(commitment_seed(kat::task_id(), 5, root), "w");
  EXPECT_EQ(prf.next_u64(), 12844176515946926403u);
  EXPECT_EQ(prf.uniform(1000), 579u);
}

TEST(KnownAnswer, SnapshotCommitment) {
  const Bytes snapshot = kat::snapshot();
  auto c = commit_snapshot(snapshot, kat::task_id(), 1, 10);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(snapshot.size(), 504u);
  EXPECT_EQ(hex_encode(c->root),
            "7a483becb6e46ffa1a98171b2d3619b5ede53dd777ea81033f31f1d8b4696459");
  EXPECT_EQ(
      canonical_json(fingerprint_to_json(c->fingerprint)),
      "{\"seed\":\"00f3c8a4d978dae3f1db1ee9d893f2d05ff5779399bf07e710bf76c1c09c23c8\",\"tensors\":["
      "{\"dtype\":\"F16\",\"indices\":[2],\"name\":\"a.bias\",\"numel\":3,\"values\":\"003e\"},"
      "{\"dtype\":\"F32\",\"indices\":[1,2,10,14,27,28],\"name\":\"a.weight\",\"numel\":32,"
      "\"values\":\"000030c0000020c0000000bf0000003f0000704000008040\"},"
      "{\"dtype\":\"BF16\",\"indices\":[1,4],\"name\":\"b\",\"numel\":5,\"values\":\"813f843f\"},"
      "{\"dtype\":\"F64\",\"indices\":[1],\"name\":\"c\",\"numel\":2,\"values\":"
      "\"00000000000002c0\"}],"
      "\"version\":1}");
}

}  // namespace
}  // namespace vt::fp
