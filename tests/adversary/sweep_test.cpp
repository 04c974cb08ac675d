// The slow sweeps behind the numbers in docs/reliability.md: each strategy over 20 seeds and
// honest runs over 50 (VT_ADVERSARY_SEEDS overrides both).

#include <gtest/gtest.h>

#include "tests/adversary/support.h"

namespace vt::adversary {
namespace {

class CheatSweep : public ::testing::TestWithParam<Strategy> {};
TEST_P(CheatSweep, RejectedOverTwentySeeds) {
  const int seeds = seed_count(20);
  EXPECT_EQ(rejected_runs(GetParam(), seeds), seeds);
}
INSTANTIATE_TEST_SUITE_P(Adversary, CheatSweep, ::testing::ValuesIn(epoch_strategies()),
                         [](const auto& info) { return strategy_name(info.param); });

TEST(HonestSweep, NeverRejectedOverFiftySeeds) {
  EXPECT_EQ(honest_rejections(seed_count(50), 3), 0);
}

}  // namespace
}  // namespace vt::adversary
