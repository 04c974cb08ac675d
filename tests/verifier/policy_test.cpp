// The challenge policy: the formula for p, the randomness stream, movement and boosting, and the
// online stream deciding exactly as the offline plan does.
#include "verifier/policy/policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "fingerprint/fingerprint.h"
#include "test_records.h"

namespace vt::verifier {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(CheckProbability, MatchesTheClosedForm) {
  // m = ceil(0.1 * 100) = 10 cheated epochs; 1 - (1 - p)^10 = 0.99.
  const double p = check_probability(0.99, 0.1, 100);
  EXPECT_NEAR(p, 1.0 - std::pow(0.01, 0.1), 1e-15);
  EXPECT_NEAR(1.0 - std::pow(1.0 - p, 10), 0.99, 1e-12);
  // A single cheated epoch must be challenged with probability P itself.
  EXPECT_NEAR(check_probability(0.9, 0.01, 10), 0.9, 1e-15);
  EXPECT_EQ(check_probability(1.0, 0.5, 10), 1.0);
  // Tiny targets keep their precision (no 1 - (1 - x) cancellation).
  EXPECT_NEAR(check_probability(1e-12, 1.0, 1), 1e-12, 1e-24);
}

TEST(CheckProbability, CheatedEpochsRoundUpButNotOnFloatingPointNoise) {
  EXPECT_EQ(cheated_epochs(0.7, 10), 7u);  // 0.7 * 10 = 7.000000000000001 in binary
  EXPECT_EQ(cheated_epochs(0.71, 10), 8u);
  EXPECT_EQ(cheated_epochs(0.001, 10), 1u);  // at least one epoch
  EXPECT_EQ(cheated_epochs(1.0, 10), 10u);
  EXPECT_EQ(cheated_epochs(0.1, 3), 1u);
}

TEST(DeriveProbability, NamesTheBadFlag) {
  PolicyRequest r;
  r.confidence = 1.5;
  Result<ProbabilityDerivation> d = derive_probability(r, 10);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, Errc::kInvalidInput);
  EXPECT_NE(d.error().message.find("--confidence"), std::string::npos) << d.error().message;
  r = {};
  r.cheat_fraction = 0.0;
  d = derive_probability(r, 10);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("--cheat-fraction"), std::string::npos);
  r = {};
  r.check_probability = 0.0;
  d = derive_probability(r, 10);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("--check-probability"), std::string::npos);
  EXPECT_FALSE(derive_probability(PolicyRequest{}, 0).ok());
}

TEST(DeriveProbability, FixedProbabilityReportsTheConfidenceItBuys) {
  PolicyRequest r;
  r.cheat_fraction = 0.2;
  r.check_probability = 0.5;
  Result<ProbabilityDerivation> d = derive_probability(r, 10);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->method, "fixed");
  EXPECT_EQ(d->p, 0.5);
  EXPECT_EQ(d->cheated_epochs, 2u);
  EXPECT_DOUBLE_EQ(d->confidence, 0.75);
}

TEST(ChallengeRandom, StreamIsSha256CounterModeOverTheSeed) {
  // Expected words from Python: hashlib.sha256(b"veritrain/challenge/v1" + seed + u64le(j)).
  Result<ChallengeRandom> r = ChallengeRandom::from_seed_hex("00112233");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->seed_hex(), "00112233");
  EXPECT_EQ(r->next_u64(), 0xdf93d2821c9c491dULL);
  r->next_u64();
  r->next_u64();
  EXPECT_EQ(r->next_u64(), 0x33671e75629fa5faULL);
  EXPECT_EQ(r->next_u64(), 0xafb5a27883e54a50ULL);  // block 1
  Result<ChallengeRandom> again = ChallengeRandom::from_seed_hex("00112233");
  EXPECT_DOUBLE_EQ(again->uniform01(), 0.8733493392615951);
}

TEST(ChallengeRandom, RejectsBadSeedsAndKeepsOsSeedsSecret) {
  EXPECT_FALSE(ChallengeRandom::from_seed_hex("").ok());
  EXPECT_FALSE(ChallengeRandom::from_seed_hex("0g").ok());
  EXPECT_FALSE(ChallengeRandom::from_seed_hex(std::string(130, 'a')).ok());
  Result<ChallengeRandom> a = ChallengeRandom::from_os();
  Result<ChallengeRandom> b = ChallengeRandom::from_os();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->seed_hex().empty());
  EXPECT_NE(a->next_u64(), b->next_u64());  // 2^-64 chance of a false failure
}

TEST(Movement, IsRelativeL2BetweenConsecutiveTrackingFingerprints) {
  const std::vector<SignedRecord> records =
      testing::records_with_tracking({{3.0f, 4.0f}, {3.0f, 4.0f}, {3.0f, 5.0f}, {6.0f, 8.0f}});
  Result<std::vector<double>> m = tracking_movements(records);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ((*m)[0], 0.0);
  EXPECT_DOUBLE_EQ((*m)[1], 1.0 / 5.0);
  EXPECT_DOUBLE_EQ((*m)[2], std::sqrt(9.0 + 9.0) / std::sqrt(34.0));
}

TEST(Movement, RejectsTrackingPositionsThatChange) {
  std::vector<SignedRecord> records =
      testing::records_with_tracking({{1.0f, 2.0f}, {1.0f, 2.5f}, {1.0f, 3.0f}});
  records[2].record.tracking_fingerprint["tensors"][0]["indices"] = {0, 2};
  Result<std::vector<double>> m = tracking_movements(records);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, Errc::kRejected);
  EXPECT_NE(m.error().message.find("epoch 2"), std::string::npos) << m.error().message;
}

TEST(Movement, NonFiniteValuesAreAnInfiniteJump) {
  const std::vector<SignedRecord> records = testing::records_with_tracking(
      {{1.0f, 2.0f}, {std::numeric_limits<float>::quiet_NaN(), 2.0f}});
  Result<std::vector<double>> m = tracking_movements(records);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(std::isinf((*m)[0]));
}

TEST(Boost, FlagsJumpsAndStallsButNotALearningRateSchedule) {
  // Movement halving every epoch (a decaying schedule): no epoch stands out from its recent past.
  std::vector<double> decay;
  for (int e = 0; e < 30; ++e) decay.push_back(0.1 * std::pow(0.5, e));
  for (std::uint64_t e = 1; e <= decay.size(); ++e) {
    EXPECT_EQ(chance_of_epoch(decay, e, 0.1).boost, Boost::kNone) << "epoch " << e;
  }
  std::vector<double> m = {0.1, 0.09, 0.11, 0.1, 0.095, 0.5, 0.1, 0.005, 0.0, 0.1};
  EXPECT_EQ(chance_of_epoch(m, 5, 0.1).boost, Boost::kNone);
  const EpochChance jump = chance_of_epoch(m, 6, 0.1);
  EXPECT_EQ(jump.boost, Boost::kJump);
  EXPECT_DOUBLE_EQ(jump.reference, 0.0975);   // median of epochs 2..5
  EXPECT_NEAR(jump.probability, 0.5, 1e-12);  // max(1 - 0.9^4 = 0.3439, floor 0.5)
  EXPECT_EQ(chance_of_epoch(m, 8, 0.1).boost, Boost::kStall);
  EXPECT_EQ(chance_of_epoch(m, 9, 0.1).boost, Boost::kStall);  // exactly zero
  EXPECT_EQ(chance_of_epoch(m, 2, 0.1).boost, Boost::kNone);   // too little history to judge
  EXPECT_NEAR(chance_of_epoch(m, 6, 0.4).probability, 1.0 - std::pow(0.6, 4), 1e-12);
  EXPECT_EQ(chance_of_epoch(m, 5, 0.1).probability, 0.1);
  const double unknown[] = {kNaN};
  EXPECT_EQ(chance_of_epoch(unknown, 1, 0.2).probability, 0.2);
}

TEST(ChallengeStream, DecidesExactlyAsTheOfflinePlan) {
  PolicyRequest r;
  r.confidence = 0.9;
  r.cheat_fraction = 0.2;
  Result<ProbabilityDerivation> d = derive_probability(r, 12);
  ASSERT_TRUE(d.ok());
  const std::vector<double> m = {0.3, 0.2, 0.2, 0.19, 0.2, 2.0, 0.18, 0.17, 0.0, 0.16, 0.15, 0.15};
  for (const char* seed : {"01", "02", "03", "04", "05", "06", "07", "08"}) {
    Result<ChallengeRandom> a = ChallengeRandom::from_seed_hex(seed);
    ASSERT_TRUE(a.ok());
    const ChallengePlan offline = plan_challenges(*d, m, *a);
    ChallengeStream online(*d, std::move(ChallengeRandom::from_seed_hex(seed)).value());
    for (double x : m) ASSERT_TRUE(online.decide(x).ok());
    ASSERT_TRUE(online.finish().ok());
    EXPECT_EQ(online.plan().challenged, offline.challenged) << "seed " << seed;
    EXPECT_EQ(offline.seed_hex, seed);
    EXPECT_FALSE(offline.challenged.empty());
    EXPECT_EQ(offline.epochs[5].boost, Boost::kJump);
    EXPECT_EQ(offline.epochs[8].boost, Boost::kStall);
    EXPECT_FALSE(online.decide(0.1).ok());  // past the last epoch
  }
}

TEST(ChallengeStream, FinishBeforeTheLastEpochIsAnError) {
  PolicyRequest r;
  Result<ProbabilityDerivation> d = derive_probability(r, 3);
  ChallengeStream s(*d, std::move(ChallengeRandom::from_seed_hex("aa")).value());
  ASSERT_TRUE(s.decide(kNaN).ok());
  EXPECT_FALSE(s.finish().ok());
}

TEST(ChallengePlan, FallsBackToOneUniformEpochWhenNothingIsDrawn) {
  PolicyRequest r;
  r.check_probability = 1e-9;
  Result<ProbabilityDerivation> d = derive_probability(r, 7);
  std::vector<int> hits(8, 0);
  Result<ChallengeRandom> rnd = ChallengeRandom::from_seed_hex("5eed");
  for (int i = 0; i < 700; ++i) {
    const ChallengePlan plan = plan_challenges(*d, {}, *rnd);
    ASSERT_TRUE(plan.fallback_used);
    ASSERT_EQ(plan.challenged.size(), 1u);
    ASSERT_TRUE(plan.epochs[plan.challenged[0] - 1].challenged);
    ++hits[plan.challenged[0]];
  }
  // Uniform over 1..7: each about 100 of 700 (sd ~9.3).
  for (int e = 1; e <= 7; ++e) EXPECT_NEAR(hits[e], 100, 40) << "epoch " << e;
}

TEST(ChallengePlan, JsonNamesEveryEpochAndTheDerivation) {
  PolicyRequest r;
  Result<ProbabilityDerivation> d = derive_probability(r, 4);
  Result<ChallengeRandom> rnd = ChallengeRandom::from_seed_hex("abcd");
  const std::vector<double> m = {0.1, kNaN, std::numeric_limits<double>::infinity(), 0.1};
  const nlohmann::json j = challenge_plan_to_json(plan_challenges(*d, m, *rnd));
  EXPECT_EQ(j["seed"], "abcd");
  EXPECT_EQ(j["derivation"]["method"], "confidence");
  ASSERT_EQ(j["epochs"].size(), 4u);
  EXPECT_TRUE(j["epochs"][1]["movement"].is_null());  // a number field holds a number or null
  EXPECT_EQ(j["epochs"][2]["boost"], "jump");
  EXPECT_EQ(j["epochs"][0]["boost"], "");
}

}  // namespace
}  // namespace vt::verifier
