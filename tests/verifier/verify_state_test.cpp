// verify --resume's state folder: every field of a judged epoch survives the round trip, and a
// damaged file is an input error that names it.
#include "verifier/check/verify_state.h"

#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "tests/test_util.h"

namespace vt::verifier {
namespace {

EpochCheck sample_check() {
  EpochCheck c;
  c.epoch = 7;
  c.passed = false;
  c.failures = {"epoch 7: differs"};
  fp::Comparison f;
  f.mode = fp::CompareMode::kTolerance;
  f.thresholds = {1e-6, 1e-5, 1e-3, 0.01};
  f.compared = 100;
  f.mismatches = 3;
  f.nonfinite_mismatches = 1;
  f.allowed_mismatches = 1;
  f.max_abs_diff = std::numeric_limits<double>::infinity();
  f.max_rel_diff = 0.125;
  f.rel_l2 = std::nan("");
  f.first_mismatch = fp::MismatchLocation{"layer.w", 42, "0000803f", "00000040", 1.0, 2.0};
  c.fingerprint = f;
  c.replay_root.fill(0xab);
  c.replay_seconds = 1.0 / 3.0;
  c.bytes_fetched = 123456789;
  c.after_fetched = true;
  c.replay_notes = {"note"};
  c.claimed_loss = 0.1 + 0.2;
  c.replay_loss = 0.30000000000000004;
  c.trail_verified = true;
  c.claimed_eval = EvalClaim{0.5, 0.875, 360};
  c.replay_eval = EvalClaim{std::numeric_limits<double>::infinity(), std::nullopt, 360};
  c.eval_status = "within_tolerance";
  c.second_replay_root = Digest{};
  c.second_replay_root->fill(0xcd);
  c.second_replay_seconds = 0.25;
  c.irreproducible = "two replays of epoch 7 on this machine differ from each other (tensor w)";
  return c;
}

TEST(VerifyState, AJudgedEpochRoundTripsExactly) {
  const EpochCheck c = sample_check();
  Result<EpochCheck> back =
      epoch_check_from_json(nlohmann::json::parse(epoch_check_to_json(c).dump()), "x");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(epoch_check_to_json(*back).dump(), epoch_check_to_json(c).dump());
  EXPECT_EQ(back->replay_seconds, c.replay_seconds);
  EXPECT_TRUE(std::isnan(back->fingerprint->rel_l2));
  EXPECT_TRUE(std::isinf(back->fingerprint->max_abs_diff));
  EXPECT_EQ(back->fingerprint->first_mismatch->index, 42u);
  EXPECT_FALSE(back->full_state.has_value());
  EXPECT_EQ(back->replay_root, c.replay_root);
  // The held-out metrics too: a resumed verdict says what an uninterrupted one would.
  ASSERT_TRUE(back->claimed_eval && back->replay_eval);
  EXPECT_EQ(back->claimed_eval->accuracy, 0.875);
  EXPECT_TRUE(std::isinf(back->replay_eval->loss));
  EXPECT_FALSE(back->replay_eval->accuracy.has_value());
  EXPECT_EQ(back->eval_status, "within_tolerance");
  // And the second replay: a resumed run does not judge an unreproduced epoch again.
  EXPECT_EQ(back->second_replay_root, c.second_replay_root);
  EXPECT_EQ(back->irreproducible, c.irreproducible);
}

TEST(VerifyState, FolderKeepsPolicySeedAndChecksAndNamesADamagedFile) {
  testing::ScratchDir dir;
  VerifyState s;
  s.task_id = "aa";
  s.log_head = "bb";
  s.seed_hex = "0123";
  s.policy.economics = EconomicsRequest{100, 50, 120, "given"};
  s.policy.cheat_fraction = 0.25;
  const auto folder = state_dir(dir.path());
  ASSERT_TRUE(begin_state(folder, s).ok());
  ASSERT_TRUE(save_check(folder, sample_check()).ok());
  Result<VerifyState> back = load_state(folder);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->seed_hex, "0123");
  EXPECT_FALSE(back->seed_given);
  ASSERT_TRUE(back->policy.economics.has_value());
  EXPECT_EQ(back->policy.economics->cost, 120.0);
  EXPECT_EQ(back->policy.cheat_fraction, 0.25);
  EXPECT_FALSE(back->policy.check_probability.has_value());
  ASSERT_EQ(back->checks.size(), 1u);
  EXPECT_EQ(back->checks.begin()->first, 7u);
  // A new run starts clean.
  ASSERT_TRUE(begin_state(folder, s).ok());
  EXPECT_TRUE(load_state(folder)->checks.empty());
  ASSERT_TRUE(write_file_atomic(folder / "epoch-3.json", std::string_view("{\"epoch\":3}\n")).ok());
  back = load_state(folder);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.error().code, Errc::kInvalidInput);
  EXPECT_NE(back.error().message.find("epoch-3.json: passed"), std::string::npos)
      << back.error().message;
  EXPECT_FALSE(load_state(dir / "nowhere").ok());
}

}  // namespace
}  // namespace vt::verifier
