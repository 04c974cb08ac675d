#include "training/zoo/schedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace vt::training {
namespace {

TEST(Schedule, DeterministicCosMatchesLibm) {
  for (int i = 0; i <= 1000; ++i) {
    double x = M_PI * i / 1000.0;
    EXPECT_NEAR(deterministic_cos(x), std::cos(x), 4.5e-16) << x;  // within 2 ulp
  }
}

TEST(Schedule, PowerIsExactForSmallCases) {
  EXPECT_EQ(power(0.5, 3), 0.125);
  EXPECT_EQ(power(2.0, 0), 1.0);
  EXPECT_NEAR(power(0.999, 1000), std::pow(0.999, 1000), 1e-14);
}

TEST(Schedule, ShapesOfEachSchedule) {
  Task t;
  t.optimizer.lr = 1.0;
  t.schedule.name = "constant";
  EXPECT_EQ(learning_rate(t, 5, 1, 100), 1.0);
  t.schedule.name = "step";
  t.schedule.step_size = 2;
  t.schedule.gamma = 0.1;
  EXPECT_EQ(learning_rate(t, 0, 2, 100), 1.0);
  EXPECT_NEAR(learning_rate(t, 0, 3, 100), 0.1, 1e-15);
  t.schedule.name = "cosine";
  t.schedule.min_lr = 0.0;
  EXPECT_EQ(learning_rate(t, 0, 1, 101), 1.0);
  EXPECT_NEAR(learning_rate(t, 50, 1, 101), 0.5, 1e-15);
  EXPECT_NEAR(learning_rate(t, 100, 1, 101), 0.0, 1e-15);
  t.schedule.name = "constant";
  t.schedule.warmup_steps = 4;
  EXPECT_EQ(learning_rate(t, 0, 1, 100), 0.25);
  EXPECT_EQ(learning_rate(t, 3, 1, 100), 1.0);
}

}  // namespace
}  // namespace vt::training
