// `verify --reward R --penalty D --cost K`: p from the economics, so that faking any number of
// epochs never pays (docs/plan.md, "p from the economics").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "verifier/policy/cost_plan.h"
#include "verifier/policy/policy.h"

namespace vt::verifier {
namespace {

PolicyRequest economics(double reward, double penalty, double cost) {
  PolicyRequest r;
  r.economics = EconomicsRequest{reward, penalty, cost, "given"};
  return r;
}

// What faking m of N epochs gains in expectation without the fallback: (m/N)·K − detection·(R + D).
double gain(double p, std::uint64_t m, std::uint64_t n, double reward, double penalty,
            double cost) {
  const double caught = 1.0 - std::pow(1.0 - p, static_cast<double>(m));
  return static_cast<double>(m) / static_cast<double>(n) * cost - caught * (reward + penalty);
}

TEST(EconomicsPolicy, KnownAnswer) {
  // ρ = 120 / 150 = 0.8, p = 1 − 0.2^(1/20) = 0.0773191654094 (python: 1-(0.2)**(1/20)).
  Result<ProbabilityDerivation> d = derive_probability(economics(100, 50, 120), 20);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->method, "economics");
  EXPECT_NEAR(d->p, 0.07731916540941175, 1e-13);
  EXPECT_DOUBLE_EQ(d->cost_ratio, 0.8);
  EXPECT_NEAR(1.0 - std::pow(1.0 - d->p, 20.0), 0.8, 1e-12);   // exactly the break-even
  EXPECT_NEAR(d->expected_checks, 1.7463833081882347, 1e-12);  // N·p + (1 − p)^N
  // The guarantee for the default 10 % cheater, 2 of 20 epochs: 1 − (1 − p)^2.
  EXPECT_NEAR(d->confidence, 1.0 - std::pow(1.0 - d->p, 2.0), 1e-12);
  EXPECT_NE(d->guarantee.find("from --reward 100 --penalty 50 and K = 120 (given)"),
            std::string::npos)
      << d->guarantee;
  EXPECT_NE(d->guarantee.find("cheating on 10 % of epochs (2 of 20)"), std::string::npos)
      << d->guarantee;
  EXPECT_NE(d->guarantee.find("does not pay"), std::string::npos) << d->guarantee;
  const nlohmann::json j = derivation_to_json(*d);
  EXPECT_EQ(j["method"], "economics");
  EXPECT_EQ(j["economics"]["reward"], 100.0);
  EXPECT_EQ(j["economics"]["cost_ratio"], 0.8);
  EXPECT_EQ(j["guarantee"], d->guarantee);
}

TEST(EconomicsPolicy, NoNumberOfFakedEpochsPaysAndASmallerPWouldLetOnePay) {
  for (std::uint64_t n : {1u, 3u, 20u, 500u}) {
    for (double cost : {10.0, 90.0, 149.0}) {
      Result<ProbabilityDerivation> d = derive_probability(economics(100, 50, cost), n);
      ASSERT_TRUE(d.ok());
      for (std::uint64_t m = 1; m <= n; ++m) {
        EXPECT_LE(gain(d->p, m, n, 100, 50, cost), 1e-9)
            << "n " << n << " cost " << cost << " m " << m;
      }
      EXPECT_GT(gain(d->p * 0.99, n, n, 100, 50, cost), 0.0)
          << "p is the smallest that works, n " << n;
    }
  }
}

TEST(EconomicsPolicy, ALongTaskNeedsAFewChecksNotAFractionOfItsEpochs) {
  // Seed 000: 2-5 checks suffice for rational providers. N·p → −ln(1 − ρ) (2.30 at ρ = 0.9,
  // 4.61 at 0.99) and the fallback adds (1 − p)^N = 1 − ρ, whether the task has 100 epochs or 10
  // 000.
  for (std::uint64_t n : {100u, 10000u}) {
    for (double rho : {0.9, 0.99}) {
      Result<ProbabilityDerivation> d = derive_probability(economics(50, 50, 100 * rho), n);
      ASSERT_TRUE(d.ok());
      const double nd = static_cast<double>(n);
      EXPECT_NEAR(d->expected_checks, nd * (1.0 - std::pow(1.0 - rho, 1.0 / nd)) + (1.0 - rho),
                  1e-9)
          << n;
      EXPECT_NEAR(d->expected_checks, -std::log(1.0 - rho) + (1.0 - rho), 0.11) << n;
      EXPECT_GE(d->expected_checks, 2.0);
      EXPECT_LE(d->expected_checks, 5.0);
    }
  }
  // The confidence policy's p depends on m = 10 % of N: 46 expected checks at N = 10 000.
  PolicyRequest fraction;
  Result<ProbabilityDerivation> c = derive_probability(fraction, 10000);
  ASSERT_TRUE(c.ok());
  EXPECT_NEAR(c->expected_checks, 45.9458, 1e-3);
}

TEST(EconomicsPolicy, RefusesInputsThatCannotBeMadeSafeAndNamesTheFlag) {
  Result<ProbabilityDerivation> d = derive_probability(economics(100, 50, 150), 20);  // R + D = K
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, Errc::kInvalidInput);
  EXPECT_NE(d.error().message.find("--reward/--penalty"), std::string::npos) << d.error().message;
  d = derive_probability(economics(-1, 50, 10), 20);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("--reward"), std::string::npos);
  d = derive_probability(economics(100, NAN, 10), 20);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("--penalty"), std::string::npos);
  d = derive_probability(economics(100, 50, 0), 20);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("--cost"), std::string::npos);
}

TEST(EconomicsPolicy, AgreesWithThePlannersRequiredProbability) {
  PlanInputs in;
  in.epochs = 40;
  in.reward = 30;
  in.penalty = 70;
  in.honest_cost = 95;
  Result<Plan> plan = make_plan(in);
  ASSERT_TRUE(plan.ok());
  Result<ProbabilityDerivation> d = derive_probability(economics(30, 70, 95), 40);
  ASSERT_TRUE(d.ok());
  EXPECT_NEAR(d->p, plan->economics->required_probability, 1e-15);
  // plan says what verify would use, with the same expected checks.
  char expected[128];
  std::snprintf(expected, sizeof expected,
                "verify --reward 30 --penalty 70 --cost 95 uses the smallest such p, %.4g: %.2f",
                d->p, d->expected_checks);
  EXPECT_NE(plan_text(*plan).find(expected), std::string::npos) << plan_text(*plan);
}

TEST(EconomicsPolicy, OtherPoliciesStateTheirGuaranteeToo) {
  PolicyRequest r;
  r.confidence = 0.99;
  r.cheat_fraction = 0.1;
  Result<ProbabilityDerivation> d = derive_probability(r, 20);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(
      d->guarantee.find(
          "from --confidence 0.99 --cheat-fraction 0.1: a provider cheating on 10 % of epochs "
          "(2 of 20) is caught with probability at least 0.99"),
      std::string::npos)
      << d->guarantee;
  EXPECT_TRUE(derivation_to_json(*d)["economics"].is_null());
  r.check_probability = 0.5;
  d = derive_probability(r, 20);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(
      d->guarantee.find(
          "given with --check-probability: a provider cheating on 10 % of epochs (2 of 20) is "
          "caught with probability at least 0.75"),
      std::string::npos)
      << d->guarantee;
}

}  // namespace
}  // namespace vt::verifier
