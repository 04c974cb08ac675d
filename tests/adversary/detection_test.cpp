// Detection rate under random challenges. Each epoch's check outcome is computed once from the
// stored artifacts (check_epoch on every epoch); then many verifications are simulated by drawing
// challenge sets with the verifier's own policy (verifier/policy/policy.h) from reproducible seeds.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "tests/adversary/support.h"
#include "verifier/policy/policy.h"

namespace vt::adversary {
namespace {

struct Simulated {
  int runs = 0;
  int caught = 0;
  double rate() const { return static_cast<double>(caught) / runs; }
};

Simulated simulate(const std::vector<bool>& epoch_fails, double p, int runs, std::uint64_t stream) {
  verifier::PolicyRequest request;
  request.check_probability = p;
  auto derivation = verifier::derive_probability(request, epoch_fails.size());
  EXPECT_TRUE(derivation.ok()) << derivation.error().message;
  Simulated s;
  for (int i = 0; i < runs; ++i) {
    char hex[33];
    std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(stream),
                  static_cast<unsigned long long>(i));
    auto random = verifier::ChallengeRandom::from_seed_hex(hex);
    EXPECT_TRUE(random.ok());
    verifier::ChallengePlan plan = verifier::plan_challenges(*derivation, {}, *random);
    bool caught = false;
    for (std::uint64_t e : plan.challenged) caught = caught || epoch_fails.at(e - 1);
    ++s.runs;
    s.caught += caught ? 1 : 0;
  }
  return s;
}

TEST(Detection, RateMatchesTheFormula) {
  testing::ScratchDir dir;
  const std::int64_t n = 10;
  const Task task = tiny_task(42, n);
  CheatPlan plan;
  plan.cheats = {{3, Strategy::kLearningRate}, {6, Strategy::kNoise}, {8, Strategy::kSkipEpoch}};
  const int m = static_cast<int>(plan.cheats.size());
  ASSERT_TRUE(write_workdir(task, dir / "wd", plan, provider_key()).ok());
  Verification v = verify_everything(dir / "wd", task);
  ASSERT_EQ(v.epochs.size(), static_cast<std::size_t>(n));
  std::vector<bool> fails;
  for (const auto& c : v.epochs) {
    fails.push_back(!c.passed);
    EXPECT_EQ(!c.passed, plan.cheats.count(c.epoch) == 1)
        << "epoch " << c.epoch << ": " << joined(c.failures);
  }

  // policy.h: one uniform fallback epoch when the draws pick none, so the exact rate is
  // 1 - (1-p)^m + (1-p)^N * m/N, never below the headline 1 - (1-p)^m.
  const int runs = 4000;
  std::uint64_t stream = 1;
  for (double p : {0.05, 0.1, 0.2, 0.5}) {
    Simulated s = simulate(fails, p, runs, stream++);
    const double headline = 1 - std::pow(1 - p, m);
    const double exact =
        headline + std::pow(1 - p, static_cast<double>(n)) * m / static_cast<double>(n);
    const double se = std::sqrt(exact * (1 - exact) / runs);
    std::printf("p=%.2f m=%d N=%lld runs=%d observed=%.4f formula=%.4f (1-(1-p)^m=%.4f) se=%.4f\n",
                p, m, static_cast<long long>(n), runs, s.rate(), exact, headline, se);
    EXPECT_NEAR(s.rate(), exact, 4 * se) << "p " << p;
    EXPECT_GE(s.rate(), headline - 4 * se) << "p " << p;
  }
}

// The simulation can fail: against an honest provider nothing is ever caught, and against one
// that cheats on every epoch everything is.
TEST(Detection, SimulationSeesOutcomes) {
  EXPECT_EQ(simulate(std::vector<bool>(10, false), 0.3, 200, 9).caught, 0);
  EXPECT_EQ(simulate(std::vector<bool>(10, true), 0.05, 200, 9).caught, 200);
}

}  // namespace
}  // namespace vt::adversary
