#pragma once
// Shared by the adversary suites: tiny tasks (one CPU core, a few ms per epoch) and a verifier
// pass over a whole workdir.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "protocol/keys.h"
#include "tests/adversary/cheater.h"
#include "tests/test_util.h"
#include "training/zoo/zoo.h"
#include "verifier/check/epoch_check.h"
#include "verifier/check/log_check.h"

namespace vt::adversary {

// A 8 -> 16 -> 4 mlp with SGD and momentum, 3 steps of 8 examples per epoch.
inline Task tiny_task(std::uint64_t seed, std::int64_t epochs = 3, std::int64_t trail_interval = 0,
                      Determinism determinism = Determinism::kExact) {
  auto t = training::default_task("mlp", "synthetic");
  EXPECT_TRUE(t.ok()) << t.error().message;
  Task task = *t;
  task.model.options = {{"input_dim", 8}, {"hidden", 16}, {"layers", 1}, {"classes", 4}};
  task.dataset.options = {{"samples", 64}, {"input_dim", 8}, {"classes", 4}};
  task.epochs = epochs;
  task.steps_per_epoch = 3;
  task.batch_size = 8;
  task.seed = seed;
  task.fingerprint = {64, 16, trail_interval};
  task.determinism = determinism;
  return task;
}

// tiny_task with every recipe of docs/task.md ("Recipes") on and binding: a gradient norm clipped
// (its norm is well above 0.05 throughout), weight decay spared on the biases, smoothed labels,
// a moving average of the weights.
inline Task recipe_task(std::uint64_t seed, std::int64_t epochs = 3,
                        std::int64_t trail_interval = 0,
                        Determinism determinism = Determinism::kExact) {
  Task task = tiny_task(seed, epochs, trail_interval, determinism);
  task.optimizer.clip_grad_norm = 0.05;
  task.optimizer.weight_decay = 0.05;
  task.optimizer.no_decay = {"body.0.bias", "body.2.bias"};
  task.loss_options.label_smoothing = 0.1;
  task.optimizer.ema_decay = 0.9;
  return task;
}

// recipe_task's recipes on a tiny cnn (width 4) with the CIFAR-10 augmentation: a crop from the
// image padded by 4, reflected, and flips.
inline Task image_recipe_task(std::uint64_t seed, std::int64_t epochs = 3,
                              std::int64_t trail_interval = 0,
                              Determinism determinism = Determinism::kExact) {
  Task task = recipe_task(seed, epochs, trail_interval, determinism);
  task.model = training::default_task("cnn", "synthetic")->model;
  task.model.options = {{"width", 4}, {"blocks", 1}, {"classes", 4}};
  task.dataset.options = {{"samples", 32}};
  task.fingerprint.k = 128;
  task.fingerprint.tracking_k = 128;
  task.optimizer.no_decay = {"head.bias"};
  task.dataset.augment = {4, "reflect", true};
  return task;
}

using TaskMaker = Task (*)(std::uint64_t seed, std::int64_t epochs, std::int64_t trail_interval,
                           Determinism determinism);

// Seed sweeps: VT_ADVERSARY_SEEDS overrides a suite's count (to re-measure quickly or longer).
inline int seed_count(int fallback) {
  const char* env = std::getenv("VT_ADVERSARY_SEEDS");
  return env != nullptr ? std::max(1, std::atoi(env)) : fallback;
}

inline const SigningKey& provider_key() {
  static const SigningKey key = *SigningKey::generate();
  return key;
}

struct Verification {
  verifier::LogFacts log;
  std::vector<verifier::EpochCheck> epochs;  // index e-1 holds epoch e
};

// check_log, then check_epoch on every epoch: what a verifier that challenges everything sees.
inline Verification verify_everything(const std::filesystem::path& workdir, const Task& task,
                                      const training::TrainerOptions& options = {}) {
  Verification v;
  auto source = verifier::open_workdir_source(workdir);
  EXPECT_TRUE(source.ok()) << source.error().message;
  if (!source.ok()) return v;
  auto facts = verifier::check_log(**source, task, options, true);
  EXPECT_TRUE(facts.ok()) << facts.error().message;
  if (!facts.ok()) return v;
  v.log = std::move(*facts);
  auto made = verifier::make_check_context(task, options, verifier::FetchAfter::kAuto);
  EXPECT_TRUE(made.ok()) << made.error().message;
  if (!made.ok()) return v;
  const verifier::CheckContext& ctx = *made;
  for (std::size_t e = 1; e < v.log.records.size(); ++e) {
    // Every epoch is challenged: each "after" state is the next one's start, or the final model.
    auto c = verifier::check_epoch(**source, ctx, v.log.records[e - 1], v.log.records[e], true);
    EXPECT_TRUE(c.ok()) << "epoch " << e << ": " << c.error().message;
    if (!c.ok()) return v;
    v.epochs.push_back(std::move(*c));
  }
  return v;
}

inline std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// One cheating run per seed with the cheat at epoch 2 of 3; returns how many times that epoch
// was rejected, and checks the rest of each verdict on the way.
inline constexpr std::uint64_t kCheatEpoch = 2;  // of 3: an honest epoch before it and after it

inline int rejected_runs(Strategy s, int seeds, std::vector<std::string>* messages = nullptr,
                         Determinism determinism = Determinism::kExact, double noise = 1e-3,
                         TaskMaker make_task = tiny_task) {
  testing::ScratchDir dir;
  int rejected = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    const Task task = make_task(static_cast<std::uint64_t>(seed) * 7919, 3, 0, determinism);
    CheatPlan plan;
    plan.cheats[kCheatEpoch] = s;
    plan.noise = noise;
    auto wd = dir / (strategy_name(s) + "-" + std::to_string(seed));
    auto run = write_workdir(task, wd, plan, provider_key());
    EXPECT_TRUE(run.ok()) << run.error().message;
    if (!run.ok()) continue;
    Verification v = verify_everything(wd, task);
    if (v.epochs.size() != 3) continue;
    // The log itself is well-formed: signatures, chain and initial state hold.
    EXPECT_TRUE(v.log.failures.empty())
        << strategy_name(s) << " seed " << seed << ": " << joined(v.log.failures);
    EXPECT_TRUE(v.epochs[0].passed)
        << strategy_name(s) << " seed " << seed << ": " << joined(v.epochs[0].failures);
    // After the cheat the provider trains honestly from its own (cheated) state: that passes.
    EXPECT_TRUE(v.epochs[2].passed)
        << strategy_name(s) << " seed " << seed << ": " << joined(v.epochs[2].failures);
    const verifier::EpochCheck& c = v.epochs[kCheatEpoch - 1];
    if (c.passed) continue;
    ++rejected;
    EXPECT_FALSE(c.replay_root_matches);
    for (const auto& f : c.failures) {
      EXPECT_EQ(f.rfind("epoch 2: ", 0), 0u) << f;
    }
    if (messages != nullptr && seed == 1) *messages = c.failures;
  }
  return rejected;
}

// Honest runs (every other seed with a trail); returns how many were rejected anywhere.
inline int honest_rejections(int seeds, std::int64_t epochs,
                             Determinism determinism = Determinism::kExact,
                             TaskMaker make_task = tiny_task) {
  testing::ScratchDir dir;
  int rejections = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    const Task task =
        make_task(static_cast<std::uint64_t>(seed) * 104729, epochs, seed % 2, determinism);
    auto wd = dir / ("honest-" + std::to_string(seed));
    auto run = write_workdir(task, wd, {}, provider_key());
    EXPECT_TRUE(run.ok()) << run.error().message;
    Verification v = verify_everything(wd, task);
    bool rejected = !v.log.failures.empty() || v.epochs.size() != static_cast<std::size_t>(epochs);
    for (const auto& c : v.epochs) {
      rejected = rejected || !c.passed;
      EXPECT_TRUE(c.passed) << "seed " << seed << ": " << joined(c.failures);
      EXPECT_TRUE(c.replay_root_matches);
    }
    rejections += rejected ? 1 : 0;
  }
  return rejections;
}

// An honest workdir of tiny_task(seed) in a scratch folder, for tests that then damage it.
struct StoredRun {
  explicit StoredRun(std::uint64_t seed) : task(tiny_task(seed)) {}
  testing::ScratchDir dir;
  Task task;
  CheatRun run;
  std::filesystem::path workdir() const { return dir / "wd"; }
  std::filesystem::path snapshot(std::uint64_t epoch) const {
    return workdir() / "snapshots" / (hex_encode(run.roots.at(epoch)) + ".vtc");
  }
};

inline void store(StoredRun& s) {
  auto run = write_workdir(s.task, s.workdir(), {}, provider_key());
  ASSERT_TRUE(run.ok()) << run.error().message;
  s.run = *run;
}

}  // namespace vt::adversary
