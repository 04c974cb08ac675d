// Held-out metrics against the replay's (verifier/check/epoch_check.h, eval_agrees).
#include <gtest/gtest.h>

#include <limits>

#include "verifier/check/epoch_check.h"

namespace vt::verifier {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

EvalClaim claim(double loss, std::optional<double> accuracy = 0.5) {
  EvalClaim c;
  c.loss = loss;
  c.accuracy = accuracy;
  c.examples = 100;
  return c;
}

TEST(EvalAgrees, ToleranceModeHoldsTheBounds) {
  EXPECT_TRUE(eval_agrees(claim(2.0), claim(2.019), false));  // 1 % of max(1, 2.019)
  EXPECT_FALSE(eval_agrees(claim(2.0), claim(2.03), false));
  EXPECT_TRUE(eval_agrees(claim(0.001), claim(0.0099), false));  // 1 % of 1 below a loss of 1
  EXPECT_TRUE(eval_agrees(claim(1.0, 0.50), claim(1.0, 0.509), false));
  EXPECT_FALSE(eval_agrees(claim(1.0, 0.50), claim(1.0, 0.52), false));
  EXPECT_FALSE(eval_agrees(claim(1.0, std::nullopt), claim(1.0, 0.5), false));
}

// A replay whose held-out loss overflowed would make the plain bound infinite, and any finite
// claim would pass it.
TEST(EvalAgrees, AFiniteClaimNeverMatchesANonFiniteReplay) {
  for (bool exact : {false, true}) {
    EXPECT_FALSE(eval_agrees(claim(0.01), claim(kInf), exact)) << exact;
    EXPECT_FALSE(eval_agrees(claim(0.01), claim(-kInf), exact)) << exact;
    EXPECT_FALSE(eval_agrees(claim(0.01), claim(kNaN), exact)) << exact;
    EXPECT_FALSE(eval_agrees(claim(kNaN), claim(0.01), exact)) << exact;
  }
}

// The log keeps a non-finite loss as null, read back as NaN: an honest diverged run claims NaN
// where its replay computes inf, and must not be rejected for it.
TEST(EvalAgrees, ANonFiniteClaimMatchesANonFiniteReplay) {
  for (bool exact : {false, true}) {
    EXPECT_TRUE(eval_agrees(claim(kNaN), claim(kInf), exact)) << exact;
    EXPECT_TRUE(eval_agrees(claim(kNaN), claim(kNaN), exact)) << exact;
  }
}

TEST(EvalAgrees, ExactModeWantsTheVeryBits) {
  EXPECT_TRUE(eval_agrees(claim(0.1 + 0.2), claim(0.1 + 0.2), true));
  EXPECT_FALSE(eval_agrees(claim(0.3), claim(0.1 + 0.2), true));
  EXPECT_FALSE(eval_agrees(claim(1.0, 0.5), claim(1.0, 0.5000001), true));
}

}  // namespace
}  // namespace vt::verifier
