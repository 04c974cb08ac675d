#include "fingerprint/sampling.h"

#include <gtest/gtest.h>

#include <set>

#include "common/sha256.h"
#include "tests/fingerprint/plan_check.h"

namespace vt::fp {
namespace {

Digest digest_of(std::uint8_t fill) {
  Digest d;
  d.fill(fill);
  return d;
}

std::vector<TensorSpec> model_specs() {
  return {{"w", DType::kF32, {100, 100}}, {"b", DType::kF32, {3}},
          {"norm", DType::kBF16, {1}},    {"step", DType::kI64, {}},
          {"rng", DType::kU8, {5056}},    {"empty", DType::kF16, {0, 4}},
          {"m.w", DType::kF64, {50, 20}}};
}

bool has_error(const Result<SamplePlan>& r, const std::string& text) {
  return !r.ok() && r.error().code == Errc::kInvalidInput &&
         r.error().message.find(text) != std::string::npos;
}

TEST(Seeds, AreDomainSeparatedHashesOfTheirInputs) {
  const Digest task = digest_of(0xab), root = digest_of(0xcd);
  Bytes expected = Bytes(as_bytes("veritrain/fingerprint/v1").begin(),
                         as_bytes("veritrain/fingerprint/v1").end());
  append_bytes(expected, task);
  append_u64le(expected, 7);
  append_bytes(expected, root);
  EXPECT_EQ(commitment_seed(task, 7, root), sha256(expected));
  EXPECT_NE(commitment_seed(task, 8, root), commitment_seed(task, 7, root));
  EXPECT_NE(commitment_seed(task, 7, digest_of(0xce)), commitment_seed(task, 7, root));
  EXPECT_NE(tracking_seed(task), tracking_seed(digest_of(0xac)));
  EXPECT_NE(trail_seed(task, 1, 2), trail_seed(task, 2, 1));
  EXPECT_NE(trail_seed(task, 0, 0), tracking_seed(task));
}

TEST(PrfStream, IsDeterministicAndPerName) {
  PrfStream a(digest_of(1), "w"), b(digest_of(1), "w"), c(digest_of(1), "x");
  std::uint64_t a0 = a.next_u64();
  EXPECT_EQ(a0, b.next_u64());
  EXPECT_NE(a0, c.next_u64());
  // Word 0 is the first 8 bytes of SHA-256(seed || u64le 1 || "w" || u64le 0).
  Bytes block(32, 1);
  append_u64le(block, 1);
  block.push_back('w');
  append_u64le(block, 0);
  EXPECT_EQ(a0, get_u64le(sha256(block).data()));
}

TEST(PrfStream, UniformStaysInRange) {
  PrfStream prf(digest_of(2), "t");
  EXPECT_EQ(prf.uniform(1), 0u);
  for (std::uint64_t bound : {2ull, 3ull, 1000ull, (1ull << 63) + 1, ~0ull}) {
    for (int i = 0; i < 200; ++i) EXPECT_LT(prf.uniform(bound), bound);
  }
  // Every residue of a small bound shows up: no value is unreachable.
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 500; ++i) seen.insert(prf.uniform(7));
  EXPECT_EQ(seen.size(), 7u);
}

TEST(Plan, SpreadsKOverFloatingTensorsWithAMinimumEach) {
  auto specs = model_specs();
  auto plan = plan_samples(digest_of(3), std::span<const TensorSpec>(specs), 100);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->count(), 100u);
  std::vector<std::string> names;
  for (const auto& t : plan->tensors) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"b", "m.w", "norm", "w"}));  // no ints, no empty
  // 4 minimum, 96 split over capacities 2, 999, 0, 9999 (of 11000 in all).
  EXPECT_EQ(plan->tensors[0].indices.size(), 1u);
  EXPECT_EQ(plan->tensors[1].indices.size(),
            10u);  // 1 + floor(96*999/11000) + 1 for the largest remainder
  EXPECT_EQ(plan->tensors[2].indices.size(), 1u);
  EXPECT_EQ(plan->tensors[3].indices.size(), 88u);  // 1 + 87
  for (const auto& t : plan->tensors) {
    for (std::size_t i = 0; i < t.indices.size(); ++i) {
      EXPECT_LT(t.indices[i], t.numel);
      if (i == 0) continue;
      EXPECT_LT(t.indices[i - 1], t.indices[i]) << t.name;
    }
  }
}

TEST(Plan, DoesNotDependOnInputOrderButOnSeed) {
  auto specs = model_specs();
  auto reversed = std::vector<TensorSpec>(specs.rbegin(), specs.rend());
  auto a = plan_samples(digest_of(4), std::span<const TensorSpec>(specs), 64);
  auto b = plan_samples(digest_of(4), std::span<const TensorSpec>(reversed), 64);
  auto c = plan_samples(digest_of(5), std::span<const TensorSpec>(specs), 64);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(a->tensors.back().indices, c->tensors.back().indices);
}

TEST(Plan, KEqualToAllElementsSamplesEveryElement) {
  std::vector<TensorSpec> specs{
      {"a", DType::kF32, {5}}, {"b", DType::kF16, {2, 3}}, {"c", DType::kF64, {1}}};
  auto plan = plan_samples(digest_of(6), std::span<const TensorSpec>(specs), 12);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->tensors[0].indices, (std::vector<std::uint64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(plan->tensors[1].indices, (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(plan->tensors[2].indices, (std::vector<std::uint64_t>{0}));
}

TEST(Plan, RejectsImpossibleRequestsWithClearErrors) {
  auto specs = model_specs();  // floating elements: 3 + 1 + 10000 + 1000 = 11004, 4 tensors
  auto span = std::span<const TensorSpec>(specs);
  EXPECT_TRUE(has_error(plan_samples(digest_of(7), span, 11005),
                        "k = 11005 exceeds the 11004 floating-point elements"));
  EXPECT_TRUE(has_error(plan_samples(digest_of(7), span, 3), "k = 3 is below the minimum 4"));
  EXPECT_TRUE(has_error(plan_samples(digest_of(7), span, 0), "k must be at least 1"));
  EXPECT_TRUE(plan_samples(digest_of(7), span, 11004).ok());
  std::vector<TensorSpec> no_floats{{"step", DType::kI64, {}}, {"empty", DType::kF32, {0}}};
  EXPECT_TRUE(has_error(plan_samples(digest_of(7), std::span<const TensorSpec>(no_floats), 1),
                        "no tensor to sample"));
  std::vector<TensorSpec> twice{{"a", DType::kF32, {2}}, {"a", DType::kF32, {2}}};
  EXPECT_TRUE(has_error(plan_samples(digest_of(7), std::span<const TensorSpec>(twice), 1),
                        "\"a\" appears twice"));
  std::vector<TensorSpec> negative{{"a", DType::kF32, {2, -1}}};
  EXPECT_TRUE(has_error(plan_samples(digest_of(7), std::span<const TensorSpec>(negative), 1),
                        "\"a\" has an invalid shape"));
}

TEST(Plan, CheckPlanAcceptsItsOwnDerivationOnly) {
  auto specs = model_specs();
  auto plan = plan_samples(digest_of(8), std::span<const TensorSpec>(specs), 50);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(check_plan(*plan).ok());
  SamplePlan moved = *plan;
  moved.tensors.back().indices.back() =
      (moved.tensors.back().indices.back() + 1) % moved.tensors.back().numel;
  auto status = check_plan(moved);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code, Errc::kRejected);
  EXPECT_NE(status.error().message.find("\"w\""), std::string::npos) << status.error().message;
  SamplePlan reseeded = *plan;
  reseeded.seed[0] ^= 1;
  EXPECT_FALSE(check_plan(reseeded).ok());
}

}  // namespace
}  // namespace vt::fp
