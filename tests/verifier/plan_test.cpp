// The planner: its numbers against closed forms, docs/plan.md's economics, and its detection
// probability against a simulation of the challenge policy itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "verifier/policy/cost_plan.h"
#include "verifier/source/source.h"

namespace vt::verifier {
namespace {

PlanInputs inputs(std::uint64_t epochs, double confidence, double cheat_fraction) {
  PlanInputs in;
  in.epochs = epochs;
  in.policy.confidence = confidence;
  in.policy.cheat_fraction = cheat_fraction;
  return in;
}

// Runs `runs` verifications of the real policy against a provider cheating on `cheated`;
// returns the fraction caught, and the check counts through `counts`.
double simulate(const Plan& plan, const std::set<std::uint64_t>& cheated, int runs,
                std::vector<std::uint64_t>* counts) {
  Result<ChallengeRandom> random = ChallengeRandom::from_seed_hex("5111");
  int caught = 0;
  for (int i = 0; i < runs; ++i) {
    const ChallengePlan c = plan_challenges(plan.probability, {}, *random);
    if (counts) counts->push_back(c.challenged.size());
    caught += std::any_of(c.challenged.begin(), c.challenged.end(),
                          [&](std::uint64_t e) { return cheated.count(e) > 0; });
  }
  return static_cast<double>(caught) / runs;
}

TEST(Plan, DetectionMatchesASimulationOfThePolicy) {
  // Few epochs and a low p make the at-least-one fallback visible: 0.3 + 0.7^5 / 5 = 0.3336.
  Result<Plan> plan = make_plan(inputs(5, 0.3, 0.2));
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->probability.cheated_epochs, 1u);
  EXPECT_NEAR(plan->detection_probability, 0.3 + std::pow(0.7, 5) / 5, 1e-12);
  EXPECT_NEAR(plan->detection_lower_bound, 0.3, 1e-12);
  const int runs = 20000;
  std::vector<std::uint64_t> counts;
  const double caught = simulate(*plan, {3}, runs, &counts);
  const double se =
      std::sqrt(plan->detection_probability * (1 - plan->detection_probability) / runs);
  EXPECT_NEAR(caught, plan->detection_probability, 3 * se);
  EXPECT_GT(std::abs(caught - plan->detection_lower_bound), 3 * se)
      << "the simulation cannot tell the fallback apart";

  double mean = 0;
  std::uint64_t within_p99 = 0;
  for (std::uint64_t c : counts) {
    mean += static_cast<double>(c) / runs;
    within_p99 += c <= plan->checks_p99;
  }
  EXPECT_NEAR(mean, plan->expected_checks, 3 * std::sqrt(5 * 0.3 * 0.7 / runs));
  EXPECT_GE(static_cast<double>(within_p99) / runs, 0.99 - 3 * std::sqrt(0.99 * 0.01 / runs));
}

TEST(Plan, DetectionMatchesASimulationWithManyCheatedEpochs) {
  Result<Plan> plan = make_plan(inputs(20, 0.9, 0.25));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->probability.cheated_epochs, 5u);
  const int runs = 10000;
  const double caught = simulate(*plan, {3, 7, 11, 15, 19}, runs, nullptr);
  const double se =
      std::sqrt(plan->detection_probability * (1 - plan->detection_probability) / runs);
  EXPECT_GE(plan->detection_probability, 0.9);
  EXPECT_NEAR(caught, plan->detection_probability, 3 * se);
}

TEST(Plan, BinomialQuantileAgreesWithExactSums) {
  EXPECT_EQ(binomial_quantile(10, 0.5, 0.99), 9u);  // P(X <= 8) = 0.9893, P(X <= 9) = 0.9990
  EXPECT_EQ(binomial_quantile(10, 0.5, 0.5), 5u);
  EXPECT_EQ(binomial_quantile(100, 0.01, 0.99), 4u);  // P(X <= 3) = 0.9816, P(X <= 4) = 0.9966
  EXPECT_EQ(binomial_quantile(7, 1.0, 0.99), 7u);
  // Large N: (1 - p)^N underflows, the quantile sits near Np + 2.33 sqrt(Np(1-p)).
  const std::uint64_t q = binomial_quantile(1000000, 0.1, 0.99);
  EXPECT_NEAR(static_cast<double>(q), 100000 + 2.326 * 300, 3);
}

TEST(Plan, ExpectedChecksCountTheFallback) {
  Result<Plan> plan = make_plan(inputs(100, 0.99, 0.1));
  ASSERT_TRUE(plan.ok());
  const double p = 1 - std::pow(0.01, 0.1);
  EXPECT_NEAR(plan->probability.p, p, 1e-12);
  EXPECT_NEAR(plan->expected_checks, 100 * p + std::pow(1 - p, 100), 1e-9);
  EXPECT_GE(plan->checks_p99, static_cast<std::uint64_t>(100 * p));
}

TEST(Plan, EconomicsReproduceDesignNumbers) {
  // K/(R+D) = 0.9 needs 2.3 expected checks; 0.99 needs 4.6 (docs/plan.md, "Economics").
  PlanInputs in = inputs(1000, 0.99, 0.01);
  in.reward = 60;
  in.penalty = 40;
  in.honest_cost = 90;
  Result<Plan> plan = make_plan(in);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_TRUE(plan->economics);
  EXPECT_NEAR(plan->economics->required_expected_checks, 2.302585, 1e-5);
  EXPECT_TRUE(plan->economics->can_be_safe);
  // p ~ 0.046 over 1000 epochs: about 46 expected checks, far more than 2.3.
  EXPECT_FALSE(plan->economics->cheating_pays);
  EXPECT_FALSE(plan->economics->cheating_pays_exact);
  in.honest_cost = 99;
  EXPECT_NEAR(make_plan(in)->economics->required_expected_checks, 4.60517, 1e-5);
}

TEST(Plan, SaysWhenCheatingPays) {
  PlanInputs in = inputs(10, 0.5, 1.0);  // p = 1 - 0.5^(1/10) ~ 0.067
  in.policy.check_probability = 0.05;
  in.reward = 10;
  in.penalty = 0;
  in.honest_cost = 9;
  Result<Plan> plan = make_plan(in);
  ASSERT_TRUE(plan.ok());
  const Economics& e = *plan->economics;
  EXPECT_NEAR(e.catch_all_probability, 1 - std::pow(0.95, 10), 1e-12);
  EXPECT_TRUE(e.cheating_pays);
  EXPECT_NEAR(e.required_probability, 1 - std::pow(0.1, 0.1), 1e-12);
  EXPECT_NE(e.conclusion.find("cheating can pay"), std::string::npos) << e.conclusion;
  // Counting the at-least-one check, every epoch is challenged with probability >= 1/N
  // (N p + (1 - p)^N >= 1), so no cheat gains in expectation once R + D > K.
  EXPECT_FALSE(e.cheating_pays_exact);
  EXPECT_LT(e.best_cheat_gain, 0.0);
  EXPECT_NE(plan_text(*plan).find("at-least-one"), std::string::npos);
}

TEST(Plan, WithTheFallbackNoCheatPaysOnceTheStakeExceedsTheCost) {
  for (std::uint64_t n : {1u, 3u, 10u, 100u}) {
    for (double p : {1e-6, 0.01, 0.2, 0.9}) {
      PlanInputs in = inputs(n, 0.5, 0.5);
      in.policy.check_probability = p;
      in.reward = 1.0;
      in.honest_cost = 0.999;
      Result<Plan> plan = make_plan(in);
      ASSERT_TRUE(plan.ok());
      EXPECT_FALSE(plan->economics->cheating_pays_exact) << "N " << n << " p " << p;
      in.honest_cost = 1.001;  // R + D < K: even cheating on everything pays
      EXPECT_TRUE(make_plan(in)->economics->cheating_pays_exact) << "N " << n << " p " << p;
    }
  }
}

TEST(Plan, NoNumberOfChecksHelpsWhenTheStakeIsBelowTheCost) {
  PlanInputs in = inputs(10, 0.999, 0.1);
  in.reward = 5;
  in.penalty = 5;
  in.honest_cost = 10;
  Result<Plan> plan = make_plan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->economics->can_be_safe);
  EXPECT_TRUE(std::isinf(plan->economics->required_expected_checks));
  EXPECT_NE(plan->economics->conclusion.find("R + D <= K"), std::string::npos);
  EXPECT_NE(plan_text(*plan).find("R + D <= K"), std::string::npos);
  EXPECT_TRUE(plan_to_json(*plan)["economics"]["required_expected_checks"].is_null());  // +inf
}

// verify's memory (docs/verifier.md, "Memory"): a large state waits on disk and is fetched after
// its replay in exact mode, so one state sits beside the trainer; tolerance mode compares two.
TEST(Plan, AReplayPeaksAtTheTrainerAndTheLargerOfAStepAndTheStatesBesideIt) {
  training::MemoryEstimate e;
  e.process_bytes = 100;
  e.resting_bytes = 1000;
  e.snapshot_bytes = kLargeStateBytes;
  e.step_peak_bytes = kLargeStateBytes / 2;
  training::PeakPrediction exact = replay_peak(e, true);
  ASSERT_EQ(exact.parts.size(), 3u);
  EXPECT_EQ(exact.total(), 1100 + kLargeStateBytes);
  EXPECT_NE(exact.parts[2].name.find("one state"), std::string::npos);
  EXPECT_EQ(replay_peak(e, false).total(), 1100 + 2 * kLargeStateBytes);
  e.step_peak_bytes = 3 * kLargeStateBytes;
  EXPECT_EQ(replay_peak(e, false).total(), 1100 + 3 * kLargeStateBytes);
  EXPECT_NE(replay_peak(e, false).parts[2].name.find("one step"), std::string::npos);
  e.snapshot_bytes = kLargeStateBytes - 1;  // small: decoded as a delta beside its base
  e.step_peak_bytes = 0;
  EXPECT_EQ(replay_peak(e, true).total(), 1100 + 2 * (kLargeStateBytes - 1));
}

TEST(Plan, PerCheckCostComesFromTheEstimateAndCodecRatio) {
  PlanInputs in = inputs(8, 0.99, 0.25);
  training::MemoryEstimate est;
  est.snapshot_bytes = 1000;
  est.step_peak_bytes = 300;
  est.step_seconds = 0.5;
  est.steps_per_epoch = 40;
  est.device = "cpu";
  in.estimate = est;
  in.codec_ratio = 0.4;
  in.reward = 100;
  Result<Plan> plan = make_plan(in);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_TRUE(plan->per_check);
  // Exact mode by default: one compressed state (the one before the epoch) per check.
  EXPECT_EQ(plan->per_check->states_per_check, 1u);
  EXPECT_EQ(plan->per_check->bytes_per_check, 400u);
  EXPECT_DOUBLE_EQ(plan->per_check->replay_seconds, 20.0);
  EXPECT_EQ(plan->per_check->device_bytes, 1300u);
  EXPECT_EQ(plan->per_check->host_bytes, 2400u);
  // A small state: two (a delta and its base) beside the trainer between epochs, above a step.
  EXPECT_EQ(plan->per_check->replay_peak_bytes, 2000u);
  EXPECT_NE(plan_text(*plan).find("one replay peaks at"), std::string::npos);
  // The final model is fetched once whatever is challenged: one compressed state.
  EXPECT_EQ(plan->final_model_bytes, 400u);
  EXPECT_NEAR(plan->expected_bytes, plan->expected_checks * 400 + 400, 1e-9);
  EXPECT_DOUBLE_EQ(plan->economics->honest_cost, 8 * 20.0);  // K from N x epoch seconds
  EXPECT_NE(plan->economics->cost_basis.find("estimated"), std::string::npos);
  const nlohmann::json j = plan_to_json(*plan);
  EXPECT_EQ(j["per_check"]["bytes"], 400);
  EXPECT_EQ(j["per_check"]["states"], 1);
  EXPECT_EQ(j["probability"]["cheated_epochs"], 2);

  // Tolerance mode or `--fetch-after always`: the state after the epoch crosses too.
  in.fetches_after = true;
  Result<Plan> both = make_plan(in);
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_EQ(both->per_check->states_per_check, 2u);
  EXPECT_EQ(both->per_check->bytes_per_check, 800u);
  EXPECT_EQ(both->per_check->host_bytes, 2800u);
  EXPECT_NE(plan_text(*both).find("(2 x "), std::string::npos);
}

TEST(Plan, RejectsInputsItCannotPlanWith) {
  PlanInputs in = inputs(8, 0.99, 0.25);
  in.reward = 10;  // no --cost and no estimate to derive K from
  Result<Plan> plan = make_plan(in);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("--cost"), std::string::npos);
  in.reward = -1;
  in.honest_cost = 1;
  plan = make_plan(in);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("--reward"), std::string::npos);
  in = inputs(8, 0.99, 0.25);
  in.estimate = training::MemoryEstimate{};
  in.codec_ratio = 0;
  EXPECT_FALSE(make_plan(in).ok());
}

}  // namespace
}  // namespace vt::verifier
