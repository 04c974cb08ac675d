// Which committed states an exact check fetches (docs/verifier.md, "What crosses the network"): the
// state before the epoch always; the state after it only when something needs it (docs/verifier.md,
// "What crosses the network").

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/adversary/support.h"

namespace vt::adversary {
namespace {

namespace fs = std::filesystem;

struct Checked {
  verifier::EpochCheck check;
  std::uint64_t before_alone = 0;  // what fetching only the state before the epoch reads
};

// Challenges `epoch` of the workdir alone, and measures on a fresh source what fetching its
// start state alone costs.
Checked challenge(const fs::path& wd, const Task& task, std::uint64_t epoch,
                  verifier::FetchAfter fetch_after, bool after_needed_later = false) {
  Checked out;
  auto source = verifier::open_workdir_source(wd);
  EXPECT_TRUE(source.ok());
  (*source)->set_limits(verifier::limits_for(task));
  auto log = (*source)->log();
  EXPECT_TRUE(log.ok());
  auto ctx = verifier::make_check_context(task, {}, fetch_after);
  EXPECT_TRUE(ctx.ok()) << ctx.error().message;
  auto c =
      verifier::check_epoch(**source, *ctx, log->at(epoch - 1), log->at(epoch), after_needed_later);
  EXPECT_TRUE(c.ok()) << c.error().message;
  if (c.ok()) out.check = std::move(*c);
  auto fresh = verifier::open_workdir_source(wd);
  EXPECT_TRUE((*fresh)->snapshot(epoch - 1, log->at(epoch - 1).record.root, std::nullopt).ok());
  out.before_alone = (*fresh)->bytes_fetched();
  return out;
}

TEST(FetchAfter, AnIsolatedExactCheckFetchesOnlyTheStateBefore) {
  testing::ScratchDir dir;
  const Task task = tiny_task(31);
  ASSERT_TRUE(write_workdir(task, dir / "wd", {}, provider_key()).ok());
  const Checked c = challenge(dir / "wd", task, 2, verifier::FetchAfter::kAuto);
  EXPECT_TRUE(c.check.passed) << joined(c.check.failures);
  EXPECT_TRUE(c.check.replay_root_matches);
  EXPECT_FALSE(c.check.after_fetched);
  EXPECT_GT(c.before_alone, 0u);
  EXPECT_EQ(c.check.bytes_fetched, c.before_alone);
}

TEST(FetchAfter, AStorageAuditOrANeighbourFetchesTheStateAfterToo) {
  testing::ScratchDir dir;
  const Task task = tiny_task(32);
  ASSERT_TRUE(write_workdir(task, dir / "wd", {}, provider_key()).ok());
  for (const auto& [mode, later] : {std::pair{verifier::FetchAfter::kAlways, false},
                                    std::pair{verifier::FetchAfter::kAuto, true}}) {
    const Checked c = challenge(dir / "wd", task, 2, mode, later);
    EXPECT_TRUE(c.check.passed) << joined(c.check.failures);
    EXPECT_TRUE(c.check.after_fetched);
    EXPECT_GT(c.check.bytes_fetched, c.before_alone);
  }
}

TEST(FetchAfter, AReplayThatMissesTheRootFetchesTheStateAfterAsEvidence) {
  testing::ScratchDir dir;
  const Task task = tiny_task(33);
  CheatPlan plan;
  plan.cheats[2] = Strategy::kLearningRate;
  ASSERT_TRUE(write_workdir(task, dir / "wd", plan, provider_key()).ok());
  const Checked c = challenge(dir / "wd", task, 2, verifier::FetchAfter::kAuto);
  EXPECT_FALSE(c.check.passed);
  EXPECT_FALSE(c.check.replay_root_matches);
  EXPECT_TRUE(c.check.after_fetched);
  EXPECT_GT(c.check.bytes_fetched, c.before_alone);
  // --fingerprint-only never fetches it, even then.
  const Checked never = challenge(dir / "wd", task, 2, verifier::FetchAfter::kNever);
  EXPECT_FALSE(never.check.passed);
  EXPECT_FALSE(never.check.after_fetched);
  EXPECT_EQ(never.check.bytes_fetched, never.before_alone);
}

}  // namespace
}  // namespace vt::adversary
