// check_evidence on signed but malformed documents: a clear error, never an exception.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "training/zoo/zoo.h"
#include "verifier/audit/audit.h"

namespace vt::verifier {
namespace {

// The documents below fail before any artifact is read; a source that has none says so.
class NoArtifacts final : public EvidenceSource {
 public:
  Result<std::string> task_json() override { return io_error("no artifacts in this test"); }
  Result<std::vector<SignedRecord>> log() override { return io_error("no artifacts in this test"); }
  Result<Bytes> snapshot(std::uint64_t, const Digest&,
                         const std::optional<std::pair<Digest, ByteSpan>>&) override {
    return io_error("no artifacts in this test");
  }
  std::uint64_t bytes_fetched() const override { return 0; }
  std::string describe() const override { return "nothing"; }
};

std::string signed_document(const nlohmann::json& evidence, const SigningKey& key) {
  return nlohmann::json{{"evidence", evidence},
                        {"signature", hex_encode(key.sign(as_bytes(canonical_json(evidence))))},
                        {"signer", hex_encode(key.public_key().raw())}}
      .dump();
}

// Regression: these once threw nlohmann exceptions out of check_evidence (found by fuzz_evidence).
TEST(Evidence, SignedButMalformedIsAnInputError) {
  auto key = SigningKey::generate();
  ASSERT_TRUE(key.ok());
  Task task = *training::default_task("mlp", "synthetic");
  NoArtifacts source;
  for (const nlohmann::json& evidence :
       {nlohmann::json(1), nlohmann::json::object(),
        nlohmann::json{{"format", 3}, {"task_id", "x"}},
        nlohmann::json{{"format", "veritrain.evidence.v1"}, {"task_id", hex_encode(task_id(task))}},
        nlohmann::json{{"format", "veritrain.evidence.v1"},
                       {"task_id", hex_encode(task_id(task))},
                       {"finding", 5},
                       {"provider_records", nlohmann::json::array()}}}) {
    auto r = check_evidence(signed_document(evidence, *key), source, task, {});
    ASSERT_FALSE(r.ok()) << evidence.dump();
    EXPECT_EQ(r.error().code, Errc::kInvalidInput) << evidence.dump() << ": " << r.error().message;
  }
}

TEST(Evidence, AnEditAfterSigningIsRejected) {
  auto key = SigningKey::generate();
  Task task = *training::default_task("mlp", "synthetic");
  NoArtifacts source;
  std::string doc = signed_document({{"format", "veritrain.evidence.v1"}, {"task_id", "a"}}, *key);
  doc[doc.find("\"a\"") + 1] = 'b';
  auto r = check_evidence(doc, source, task, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kRejected);
}

}  // namespace
}  // namespace vt::verifier
