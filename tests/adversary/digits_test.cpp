// sklearn's digits as a `tensors` dataset (scripts/make_digits.py). The mlp
// trained by `veritrain train` reaches >= 90 % held-out accuracy, `veritrain verify` accepts the
// workdir with the held-out metrics verified bit for bit, and a provider that trains one epoch
// with another learning rate, or claims a better held-out accuracy than it reached, is rejected.

#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "protocol/log.h"
#include "tests/adversary/support.h"
#include "training/eval_claim.h"

namespace vt::adversary {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::veritrain_binary;

struct Digits {
  testing::ScratchDir dir;
  Task task;
  Digits() {
    auto r = run_command(
        "/usr/bin/python3 " VT_SOURCE_DIR "/scripts/make_digits.py " + (dir / "digits").string(),
        dir.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    task = *training::default_task("mlp", "tensors");
    task.model.options = {{"input_dim", 64}, {"hidden", 64}, {"layers", 1}, {"classes", 10}};
    task.dataset.path = "digits";
    const nlohmann::json printed = nlohmann::json::parse(r.out);  // items() refers into it
    for (const auto& item : printed.items()) {
      const std::string& name = item.key();
      (name == "digits-eval.safetensors" ? task.dataset.eval_files : task.dataset.files)[name] =
          item.value().get<std::string>();
    }
    task.optimizer = {.name = "sgd", .lr = 0.1, .momentum = 0.9};
    task.epochs = 4;
    task.seed = 11;
    task.fingerprint.trail_interval = 0;
    EXPECT_TRUE(write_file_atomic(task_file(), as_bytes(pretty_task_json(task))).ok());
  }
  std::string task_file() const { return (dir / "task.json").string(); }
  testing::CommandResult verify(const fs::path& wd, const std::string& report) const {
    return run_command(veritrain_binary() + " --json verify --task " + task_file() + " --workdir " +
                           wd.string() + " --check-probability 1 --seed 01 --jobs 1 --report " +
                           (dir / report).string(),
                       dir.path());
  }
};

TEST(Digits, MlpReachesNinetyPercentHeldOutAndVerifies) {
  Digits d;
  auto train = run_command(veritrain_binary() + " --json train --task " + d.task_file() +
                               " --workdir " + (d.dir / "wd").string(),
                           d.dir.path());
  ASSERT_EQ(train.exit_code, 0) << train.err;
  auto log = read_log(d.dir / "wd" / "commitments.log");
  ASSERT_TRUE(log.ok()) << log.error().message;
  ASSERT_EQ(log->records.size(), 5u);
  EXPECT_FALSE(
      log->records[0].record.metrics.eval.has_value());  // the initial state trained on nothing
  const auto& last = log->records.back().record.metrics.eval;
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->examples, 359u);
  ASSERT_TRUE(last->accuracy.has_value());
  EXPECT_GE(*last->accuracy, 0.90);

  auto v = d.verify(d.dir / "wd", "report");
  ASSERT_EQ(v.exit_code, 0) << v.out << v.err;
  auto verdict = nlohmann::json::parse(v.out);
  ASSERT_EQ(verdict["checks"].size(), 4u) << verdict.dump();
  for (const auto& c : verdict["checks"]) {
    EXPECT_EQ(c["metrics"]["eval"]["status"], "verified") << c.dump();
    EXPECT_EQ(c["metrics"]["eval"]["claimed"], c["metrics"]["eval"]["replayed"]) << c.dump();
  }
  EXPECT_EQ(verdict["checks"][3]["metrics"]["eval"]["claimed"]["accuracy"].get<double>(),
            *last->accuracy);
}

TEST(Digits, AnEpochTrainedWithAnotherLearningRateIsRejected) {
  Digits d;
  training::TrainerOptions options;
  options.task_dir = d.dir.path();
  CheatPlan plan;
  plan.cheats[2] = Strategy::kLearningRate;
  auto run = write_workdir(d.task, d.dir / "wd", plan, provider_key(), options);
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto v = d.verify(d.dir / "wd", "report");
  ASSERT_EQ(v.exit_code, 1) << v.out << v.err;
  auto verdict = nlohmann::json::parse(v.out);
  EXPECT_EQ(verdict["result"], "rejected");
  for (const auto& c : verdict["checks"]) {
    EXPECT_EQ(c["passed"].get<bool>(), c["epoch"] != 2)
        << c.dump();  // only the cheated epoch fails
  }
}

TEST(Digits, AnInflatedHeldOutAccuracyIsRejected) {
  Digits d;
  training::TrainerOptions options;
  options.task_dir = d.dir.path();
  auto run = write_workdir(d.task, d.dir / "wd", {}, provider_key(), options);
  ASSERT_TRUE(run.ok()) << run.error().message;
  // The provider rewrites epoch 3's claim and re-signs the whole chain with its own key.
  auto log = read_log(d.dir / "wd" / "commitments.log");
  ASSERT_TRUE(log.ok());
  Bytes rewritten;
  Digest prev{};
  for (const auto& r : log->records) {
    CommitRecord rec = r.record;
    rec.prev = prev;
    if (rec.epoch == 3) rec.metrics.eval->accuracy = 1.0;
    auto s = sign_record(rec, provider_key());
    ASSERT_TRUE(s.ok());
    Bytes line = encode_record(*s);
    prev = s->hash;
    rewritten.insert(rewritten.end(), line.begin(), line.end());
  }
  ASSERT_TRUE(write_file_atomic(d.dir / "wd" / "commitments.log", rewritten).ok());
  auto v = d.verify(d.dir / "wd", "report");
  ASSERT_EQ(v.exit_code, 1) << v.out << v.err;
  auto verdict = nlohmann::json::parse(v.out);
  EXPECT_NE(verdict["reasons"].dump().find("held-out"), std::string::npos)
      << verdict["reasons"].dump();
  EXPECT_EQ(verdict["checks"][2]["metrics"]["eval"]["status"], "claimed");
}

// Tolerance mode: the provider trained with two threads, the verifier replays with the task's
// one. The held-out metrics are judged within docs/datasets.md's bounds, not by their bits, and
// an accuracy inflated beyond them is still rejected.
TEST(Digits, ToleranceModeJudgesHeldOutMetricsWithinBounds) {
  Digits d;
  d.task.determinism = Determinism::kTolerance;
  d.task.tolerance = {2.9e-4, 0.0, 1.1e-5, 0.0};
  d.task.epochs = 2;
  training::TrainerOptions provider;
  provider.task_dir = d.dir.path();
  provider.intra_op_threads = 2;
  auto run = write_workdir(d.task, d.dir / "wd", {}, provider_key(), provider);
  ASSERT_TRUE(run.ok()) << run.error().message;
  training::TrainerOptions verifier;
  verifier.task_dir = d.dir.path();
  Verification v = verify_everything(d.dir / "wd", d.task, verifier);
  ASSERT_EQ(v.epochs.size(), 2u);
  for (const auto& c : v.epochs) {
    EXPECT_TRUE(c.passed) << joined(c.failures);
    EXPECT_EQ(c.eval_status, "within_tolerance");
    ASSERT_TRUE(c.claimed_eval && c.replay_eval);
    EXPECT_NEAR(*c.claimed_eval->accuracy, *c.replay_eval->accuracy,
                training::kEvalAccuracyTolerance);
  }

  auto log = read_log(d.dir / "wd" / "commitments.log");
  ASSERT_TRUE(log.ok());
  Bytes rewritten;
  Digest prev{};
  for (const auto& r : log->records) {
    CommitRecord rec = r.record;
    rec.prev = prev;
    if (rec.epoch == 2)
      *rec.metrics.eval->accuracy = std::min(1.0, *rec.metrics.eval->accuracy + 0.05);
    auto s = sign_record(rec, provider_key());
    ASSERT_TRUE(s.ok());
    Bytes line = encode_record(*s);
    prev = s->hash;
    rewritten.insert(rewritten.end(), line.begin(), line.end());
  }
  ASSERT_TRUE(write_file_atomic(d.dir / "wd" / "commitments.log", rewritten).ok());
  Verification w = verify_everything(d.dir / "wd", d.task, verifier);
  ASSERT_EQ(w.epochs.size(), 2u);
  EXPECT_TRUE(w.epochs[0].passed);
  EXPECT_FALSE(w.epochs[1].passed);
  EXPECT_NE(joined(w.epochs[1].failures).find("beyond the tolerance-mode bounds"),
            std::string::npos)
      << joined(w.epochs[1].failures);
}

}  // namespace
}  // namespace vt::adversary
