// The auditor on stored artifacts: an honest epoch replays bit-identically; a tampered one is
// located by its committed trail; evidence re-checks and fails after any edit.

#include "verifier/audit/audit.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/adversary/support.h"

namespace vt::adversary {
namespace {

struct AuditedRun {
  testing::ScratchDir dir;
  Task task;
  std::unique_ptr<verifier::EvidenceSource> source;
  std::vector<SignedRecord> records;
};

// Four steps per epoch and a trail point after every step.
void make_run(AuditedRun& r, const CheatPlan& plan) {
  r.task = tiny_task(17, 3, 1);
  r.task.steps_per_epoch = 4;
  ASSERT_TRUE(write_workdir(r.task, r.dir / "wd", plan, provider_key()).ok());
  auto source = verifier::open_workdir_source(r.dir / "wd");
  ASSERT_TRUE(source.ok());
  r.source = std::move(*source);
  r.source->set_limits(verifier::limits_for(r.task));
  r.records = *r.source->log();
}

TEST(Audit, HonestEpochIsBitIdentical) {
  AuditedRun r;
  make_run(r, {});
  auto f = verifier::audit_epoch(*r.source, r.task, 2, {});
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_TRUE(f->bit_identical);
  EXPECT_TRUE(f->within_tolerance);
  EXPECT_FALSE(f->first_diverging_step.has_value());
  EXPECT_EQ(f->replay_root, r.records[2].record.root);
}

// A doubled learning rate changes the very first step.
TEST(Audit, LearningRateCheatDivergesAtStepOne) {
  AuditedRun r;
  CheatPlan plan;
  plan.cheats[2] = Strategy::kLearningRate;
  make_run(r, plan);
  auto f = verifier::audit_epoch(*r.source, r.task, 2, {});
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_FALSE(f->bit_identical);
  EXPECT_FALSE(f->within_tolerance);
  EXPECT_EQ(f->last_matching_step, 0);
  EXPECT_EQ(f->first_diverging_step, 1);
  EXPECT_FALSE(f->differences.empty());
  EXPECT_NE(f->summary.find("epoch 2 first diverges between step 0 and step 1 of 4"),
            std::string::npos)
      << f->summary;
}

// Noise added after an honest epoch: every trail point matches, the end does not.
TEST(Audit, NoiseCheatDivergesAfterTheLastTrailPoint) {
  AuditedRun r;
  CheatPlan plan;
  plan.cheats[2] = Strategy::kNoise;
  make_run(r, plan);
  auto f = verifier::audit_epoch(*r.source, r.task, 2, {});
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_FALSE(f->bit_identical);
  EXPECT_EQ(f->last_matching_step, 4);
  EXPECT_FALSE(f->first_diverging_step.has_value());
  EXPECT_NE(f->summary.find("diverges after the last trail point (step 4)"), std::string::npos)
      << f->summary;
}

TEST(Audit, EvidenceAgreesAndFailsAfterAnyEdit) {
  AuditedRun r;
  CheatPlan plan;
  plan.cheats[2] = Strategy::kLearningRate;
  make_run(r, plan);
  auto f = verifier::audit_epoch(*r.source, r.task, 2, {});
  ASSERT_TRUE(f.ok());
  auto auditor = SigningKey::generate();
  ASSERT_TRUE(auditor.ok());
  auto evidence = verifier::make_evidence(*f, r.task, r.records[1], r.records[2], *auditor);
  ASSERT_TRUE(evidence.ok()) << evidence.error().message;
  auto check = verifier::check_evidence(*evidence, *r.source, r.task, {});
  ASSERT_TRUE(check.ok()) << check.error().message;
  EXPECT_TRUE(check->agrees);
  EXPECT_EQ(check->recomputed.first_diverging_step, 1);
  EXPECT_EQ(check->auditor_fingerprint, auditor->public_key().fingerprint());

  // A claim that edits the finding: step 1 -> step 3, in valid JSON.
  auto doc = nlohmann::json::parse(*evidence);
  doc["evidence"]["finding"]["first_diverging_step"] = 3;
  auto edited = verifier::check_evidence(doc.dump(2), *r.source, r.task, {});
  ASSERT_FALSE(edited.ok());
  EXPECT_NE(edited.error().message.find("signature"), std::string::npos) << edited.error().message;

  // Every byte of the body, flipped in turn (every third byte, to stay fast): never accepted.
  const std::string body = *evidence;
  const auto begin = body.find("\"evidence\"");
  int flips = 0;
  for (std::size_t i = begin; i < body.size(); i += 3) {
    std::string bad = body;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    auto c = verifier::check_evidence(bad, *r.source, r.task, {});
    EXPECT_FALSE(c.ok() && c->agrees)
        << "flipping byte " << i << " ('" << body[i] << "') was accepted";
    ++flips;
  }
  EXPECT_GT(flips, 100);
}

}  // namespace
}  // namespace vt::adversary
