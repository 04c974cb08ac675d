#include "fingerprint/compare.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

namespace vt::fp {
namespace {

// A one-tensor fingerprint of F32 values at positions 0..n-1.
Fingerprint f32_fingerprint(const std::vector<float>& values) {
  TensorSamples t{"w", DType::kF32, values.size(), {}};
  Bytes raw;
  for (std::size_t i = 0; i < values.size(); ++i) {
    t.indices.push_back(i);
    append_u32le(raw, std::bit_cast<std::uint32_t>(values[i]));
  }
  return Fingerprint{SamplePlan{Digest{}, {t}}, {raw}};
}

Comparison run(const std::vector<float>& a, const std::vector<float>& b, CompareMode mode,
               Tolerance tol = {}) {
  auto r = compare(f32_fingerprint(a), f32_fingerprint(b), mode, tol);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? *r : Comparison{};
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kTiny = std::numeric_limits<float>::denorm_min();

TEST(Compare, ExactIsBitwise) {
  EXPECT_TRUE(run({1, 2, 3}, {1, 2, 3}, CompareMode::kExact).match);
  Comparison c = run({1, -0.0f, 3, 4}, {1, 0.0f, 3, 5}, CompareMode::kExact);
  EXPECT_FALSE(c.match);
  EXPECT_EQ(c.mismatches, 2u);
  ASSERT_TRUE(c.first_mismatch);
  EXPECT_EQ(c.first_mismatch->index, 1u);
  EXPECT_EQ(c.first_mismatch->replay_bits, "00000080");
  EXPECT_EQ(c.first_mismatch->committed_bits, "00000000");
  EXPECT_EQ(c.max_abs_diff, 1.0);
  EXPECT_TRUE(run({kNaN}, {kNaN}, CompareMode::kExact).match);  // same bits
  EXPECT_FALSE(run({kTiny}, {0.0f}, CompareMode::kExact).match);
}

TEST(Compare, ToleranceTreatsSignedZerosAsEqual) {
  EXPECT_TRUE(run({-0.0f, 1}, {0.0f, 1}, CompareMode::kTolerance).match);
}

TEST(Compare, NonFiniteNeverMatchesFinite) {
  Tolerance loose{1e30, 1e30, 1e30, 1.0};
  Comparison c = run({kNaN, 1}, {1, 1}, CompareMode::kTolerance, loose);
  EXPECT_FALSE(c.match);
  EXPECT_EQ(c.nonfinite_mismatches, 1u);
  EXPECT_FALSE(run({1}, {kInf}, CompareMode::kTolerance, loose).match);
  EXPECT_FALSE(run({-kInf}, {kInf}, CompareMode::kTolerance, loose).match);
  EXPECT_TRUE(run({kInf, kNaN}, {kInf, -kNaN}, CompareMode::kTolerance).match);
}

TEST(Compare, SubnormalsCompareByValue) {
  EXPECT_FALSE(run({kTiny}, {0.0f}, CompareMode::kTolerance, {0, 0, 1, 0}).match);
  Comparison c = run({kTiny, 1}, {0.0f, 1}, CompareMode::kTolerance, {2e-45, 0, 1e-30, 0});
  EXPECT_TRUE(c.match);
  EXPECT_EQ(c.max_abs_diff, static_cast<double>(kTiny));
  EXPECT_EQ(c.rel_l2, static_cast<double>(kTiny));
  // All committed values zero and the replay not: the relative error is unbounded.
  c = run({kTiny}, {0.0f}, CompareMode::kTolerance, {2e-45, 0, 1e30, 0});
  EXPECT_EQ(c.mismatches, 0u);
  EXPECT_TRUE(std::isinf(c.rel_l2));
  EXPECT_FALSE(c.match);
}

TEST(Compare, OutlierFractionAndRelativeL2AreBothEnforced) {
  std::vector<float> b(100, 1.0f), a = b;
  a[37] = 1.5f;
  Tolerance tol{1e-6, 0, 0.1, 0.01};
  Comparison c = run(a, b, CompareMode::kTolerance, tol);
  EXPECT_EQ(c.mismatches, 1u);
  EXPECT_EQ(c.allowed_mismatches, 1u);
  EXPECT_NEAR(c.rel_l2, 0.05, 1e-12);
  EXPECT_TRUE(c.match);
  EXPECT_EQ(c.first_mismatch->index, 37u);
  tol.max_outlier_fraction = 0.009;
  EXPECT_FALSE(run(a, b, CompareMode::kTolerance, tol).match);
  tol = {1.0, 0, 0.04, 0};
  c = run(a, b, CompareMode::kTolerance, tol);
  EXPECT_EQ(c.mismatches, 0u);
  EXPECT_FALSE(c.match);  // every value within atol, but the aggregate is off
}

TEST(Compare, RelativeToleranceScalesWithCommittedValue) {
  EXPECT_TRUE(run({101}, {100}, CompareMode::kTolerance, {0, 0.01, 1, 0}).match);
  EXPECT_FALSE(run({100}, {99}, CompareMode::kTolerance, {0, 0.01, 1, 0}).match);  // 1 > 0.99
}

TEST(Compare, RefusesDifferentPlansAndBadThresholds) {
  Fingerprint a = f32_fingerprint({1, 2}), b = f32_fingerprint({1, 2});
  b.plan.tensors[0].indices[1] = 5;
  auto r = compare(a, b, CompareMode::kExact);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("tensor \"w\""), std::string::npos);
  auto bad = compare(a, a, CompareMode::kTolerance, {-1, 0, 0, 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("tolerance.atol"), std::string::npos);
}

TEST(Compare, DecodesHalfAndBfloat16Exactly) {
  const std::uint8_t half_one[] = {0x00, 0x3c}, half_sub[] = {0x01, 0x80},
                     half_inf[] = {0x00, 0x7c};
  EXPECT_EQ(decode_value(DType::kF16, half_one), 1.0);
  EXPECT_EQ(decode_value(DType::kF16, half_sub), -std::ldexp(1.0, -24));
  EXPECT_TRUE(std::isinf(decode_value(DType::kF16, half_inf)));
  const std::uint8_t bf_pi[] = {0x49, 0x40};  // 0x4049 = 3.140625
  EXPECT_EQ(decode_value(DType::kBF16, bf_pi), 3.140625);
}

TEST(Compare, JsonRecordCarriesThresholdsAndLocation) {
  Comparison c = run({1, 2}, {1, 3}, CompareMode::kTolerance, {0.5, 0, 1, 0});
  nlohmann::json j = comparison_to_json(c);
  EXPECT_EQ(j["mode"], "tolerance");
  EXPECT_EQ(j["compared"], 2);
  EXPECT_EQ(j["mismatches"], 1);
  EXPECT_EQ(j["first_mismatch"]["tensor"], "w");
  EXPECT_EQ(j["first_mismatch"]["index"], 1);
  EXPECT_EQ(j["thresholds"]["atol"], 0.5);
  EXPECT_EQ(j["match"], false);
  EXPECT_EQ(comparison_to_json(run({0}, {kTiny}, CompareMode::kExact))["rel_l2"], 1.0);
  EXPECT_TRUE(
      comparison_to_json(run({kTiny}, {0}, CompareMode::kExact))["rel_l2"].is_null());  // +inf
}

}  // namespace
}  // namespace vt::fp
