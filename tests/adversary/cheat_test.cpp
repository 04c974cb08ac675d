// Every cheating strategy is rejected whenever its epoch is challenged, and the rejection names
// that epoch; honest epochs around it pass (a verifier blames exactly the cheated transition).
// Honest providers are never rejected. Integration runs 3 seeds (5 honest); the slow variants
// run 20 (50 honest), or VT_ADVERSARY_SEEDS.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "provider/provider.h"
#include "tests/adversary/support.h"

namespace vt::adversary {
namespace {

class Cheat : public ::testing::TestWithParam<Strategy> {};

TEST_P(Cheat, RejectedWheneverChallenged) {
  const int seeds = seed_count(3);
  std::vector<std::string> messages;
  EXPECT_EQ(rejected_runs(GetParam(), seeds, &messages), seeds);
  // What failed is named: every strategy is caught by the replay's fingerprint (all the
  // committed values are the cheater's own, so only the replay can tell).
  ASSERT_FALSE(messages.empty());
  EXPECT_NE(joined(messages).find("replay does not reach the committed fingerprint"),
            std::string::npos)
      << joined(messages);
  EXPECT_NE(joined(messages).find("is not bit-identical"), std::string::npos) << joined(messages);
  RecordProperty("strategy", strategy_name(GetParam()));
  RecordProperty("first_message", messages.front());
}

INSTANTIATE_TEST_SUITE_P(Adversary, Cheat, ::testing::ValuesIn(epoch_strategies()),
                         [](const auto& info) { return strategy_name(info.param); });

// The test must be able to fail: the "honest" strategy run through the same harness is never
// rejected, so a cheat that silently did nothing would show up as a miss above.
TEST(CheatControl, HonestStrategyIsNeverRejected) {
  EXPECT_EQ(rejected_runs(Strategy::kHonest, 2), 0);
}

TEST(Honest, NeverRejected) { EXPECT_EQ(honest_rejections(seed_count(5), 3), 0); }

// The same suite with portable arithmetic (docs/portable.md): every cheat is rejected, every
// honest run accepted.
class CheatPortable : public ::testing::TestWithParam<Strategy> {};

TEST_P(CheatPortable, RejectedWheneverChallenged) {
  const int seeds = seed_count(2);
  std::vector<std::string> messages;
  EXPECT_EQ(rejected_runs(GetParam(), seeds, &messages, Determinism::kPortable), seeds);
  EXPECT_NE(joined(messages).find("replay does not reach the committed fingerprint"),
            std::string::npos)
      << joined(messages);
}

INSTANTIATE_TEST_SUITE_P(Adversary, CheatPortable, ::testing::ValuesIn(epoch_strategies()),
                         [](const auto& info) { return strategy_name(info.param); });

TEST(HonestPortable, NeverRejected) {
  EXPECT_EQ(honest_rejections(seed_count(3), 3, Determinism::kPortable), 0);
}

// A recipe is part of the work paid for: an epoch trained without the task's clipping, with decay
// on the parameters it spares, without its label smoothing or without moving the weights'
// average is rejected, in either arithmetic, and an honest provider running every recipe is not.
struct RecipeCase {
  Strategy strategy;
  Determinism determinism;
};

class RecipeCheat : public ::testing::TestWithParam<RecipeCase> {};

TEST_P(RecipeCheat, RejectedWheneverChallenged) {
  const int seeds = seed_count(2);
  std::vector<std::string> messages;
  EXPECT_EQ(rejected_runs(GetParam().strategy, seeds, &messages, GetParam().determinism, 1e-3,
                          recipe_task),
            seeds);
  EXPECT_NE(joined(messages).find("replay does not reach the committed fingerprint"),
            std::string::npos)
      << joined(messages);
}

std::vector<RecipeCase> recipe_cases() {
  std::vector<RecipeCase> cases;
  for (Strategy s : recipe_strategies())
    for (Determinism d : {Determinism::kExact, Determinism::kPortable}) cases.push_back({s, d});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Adversary, RecipeCheat, ::testing::ValuesIn(recipe_cases()),
                         [](const auto& info) {
                           return strategy_name(info.param.strategy) +
                                  (info.param.determinism == Determinism::kPortable ? "_portable"
                                                                                    : "_exact");
                         });

TEST(RecipeCheat, SkippedAugmentationIsRejectedInEitherArithmetic) {
  for (Determinism d : {Determinism::kExact, Determinism::kPortable}) {
    std::vector<std::string> messages;
    EXPECT_EQ(rejected_runs(Strategy::kSkipAugmentation, seed_count(2), &messages, d, 1e-3,
                            image_recipe_task),
              seed_count(2));
    EXPECT_NE(joined(messages).find("replay does not reach the committed fingerprint"),
              std::string::npos)
        << joined(messages);
  }
}

TEST(HonestRecipe, NeverRejected) {
  for (Determinism d : {Determinism::kExact, Determinism::kPortable}) {
    EXPECT_EQ(honest_rejections(seed_count(2), 3, d, recipe_task), 0);
    EXPECT_EQ(honest_rejections(seed_count(2), 3, d, image_recipe_task), 0);
  }
}

// Bits that depend on the task alone make any change visible: a relative weight noise of 1e-5,
// far below what tolerance mode's calibrated thresholds let through (docs/tolerance.md), is
// rejected every time.
TEST(CheatPortable, TinyWeightNoiseTheToleranceModeMissesIsRejected) {
  const int seeds = seed_count(3);
  EXPECT_EQ(rejected_runs(Strategy::kNoise, seeds, nullptr, Determinism::kPortable, 1e-5), seeds);
}

// The cheater's honest mode commits what the real provider commits, field for field: its cheats
// differ from an honest provider only where the strategy says.
TEST(CheatControl, HonestModeCommitsWhatTheProviderCommits) {
  testing::ScratchDir dir;
  const Task task = tiny_task(11, 2, 1);
  ASSERT_TRUE(write_workdir(task, dir / "cheater", {}, provider_key()).ok());
  provider::ProviderOptions opts;
  opts.workdir = dir / "provider";
  auto summary = provider::run_provider(task, opts);
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  auto a = read_log(dir / "cheater" / "commitments.log");
  auto b = read_log(dir / "provider" / "commitments.log");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->records.size(), 3u);
  ASSERT_EQ(b->records.size(), 3u);
  for (std::size_t e = 0; e < 3; ++e) {
    const CommitRecord& x = a->records[e].record;
    const CommitRecord& y = b->records[e].record;
    EXPECT_EQ(x.root, y.root) << "epoch " << e;
    EXPECT_EQ(x.fingerprint, y.fingerprint) << "epoch " << e;
    EXPECT_EQ(x.tracking_fingerprint, y.tracking_fingerprint) << "epoch " << e;
    EXPECT_EQ(nlohmann::json(x.trail), nlohmann::json(y.trail)) << "epoch " << e;
    EXPECT_EQ(x.data_order_digest, y.data_order_digest) << "epoch " << e;
    EXPECT_EQ(x.metrics.steps, y.metrics.steps);
    EXPECT_EQ(x.metrics.loss, y.metrics.loss);
  }
}

// Strategy 6 is a real threat only because positions move with the root: at the positions the
// cheap state's own root names, the forgery equals the honest state; at the committed ones it
// does not.
TEST(Forge, MatchesHonestValuesOnlyWherePositionsDidNotMove) {
  testing::ScratchDir dir;
  const Task task = tiny_task(5);
  const Digest id = task_id(task);
  auto honest_run = write_workdir(task, dir / "honest", {}, provider_key());
  ASSERT_TRUE(honest_run.ok());
  auto source = verifier::open_workdir_source(dir / "honest");
  ASSERT_TRUE(source.ok());
  auto before = (*source)->snapshot(1, honest_run->roots[1], std::nullopt);
  auto after = (*source)->snapshot(2, honest_run->roots[2], std::nullopt);
  ASSERT_TRUE(before.ok() && after.ok());
  auto cheap =
      rewrite_metadata(*before, {{"epoch", "2"}, {"data_cursor", "2"}, {"global_step", "6"}});
  ASSERT_TRUE(cheap.ok()) << cheap.error().message;
  auto forged = forge_snapshot(*cheap, *after, id, 2, 64);
  ASSERT_TRUE(forged.ok()) << forged.error().message;
  auto forged_view = parse_safetensors(forged->bytes);
  auto honest_view = parse_safetensors(*after);
  ASSERT_TRUE(forged_view.ok() && honest_view.ok());
  EXPECT_EQ(*fp::gather(forged->known_plan, *forged_view),
            *fp::gather(forged->known_plan, *honest_view));
  auto committed = fp::commit_snapshot(forged->bytes, id, 2, 64);
  ASSERT_TRUE(committed.ok());
  EXPECT_NE(committed->fingerprint.plan, forged->known_plan);
  EXPECT_NE(committed->fingerprint, *fp::gather(committed->fingerprint.plan, *honest_view));
}

// What check_log catches on its own, without any replay.
TEST(LogCheck, RejectsAForgedInitialState) {
  testing::ScratchDir dir;
  const Task task = tiny_task(3);
  CheatPlan plan;
  plan.cheats[0] = Strategy::kForgedStart;
  ASSERT_TRUE(write_workdir(task, dir / "wd", plan, provider_key()).ok());
  Verification v = verify_everything(dir / "wd", task);
  ASSERT_EQ(v.log.failures.size(), 1u);
  EXPECT_NE(v.log.failures[0].find(
                "epoch 0: the committed initial state is not the one the task defines"),
            std::string::npos)
      << v.log.failures[0];
  // Every later epoch is an honest transition from that start: only the log check can tell.
  for (const auto& c : v.epochs) EXPECT_TRUE(c.passed) << joined(c.failures);
}

TEST(LogCheck, RejectsABrokenHashChain) {
  testing::ScratchDir dir;
  const Task task = tiny_task(3);
  ASSERT_TRUE(write_workdir(task, dir / "wd", {}, provider_key()).ok());
  // Drop epoch 1's record: epoch 2 now follows epoch 0 and names a prev the log lacks.
  const auto log_path = dir / "wd" / "commitments.log";
  std::string text = *read_text_file(log_path);
  const auto first = text.find('\n') + 1;
  const auto second = text.find('\n', first) + 1;
  text.erase(first, second - first);
  ASSERT_TRUE(write_file_atomic(log_path, as_bytes(text)).ok());
  auto source = verifier::open_workdir_source(dir / "wd");
  ASSERT_TRUE(source.ok());
  auto facts = verifier::check_log(**source, task, {}, true);
  ASSERT_TRUE(facts.ok());
  ASSERT_FALSE(facts->failures.empty());
  EXPECT_NE(joined(facts->failures).find("epoch"), std::string::npos) << joined(facts->failures);
}

}  // namespace
}  // namespace vt::adversary
