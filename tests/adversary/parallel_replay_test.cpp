// `verify --jobs`: replays in child processes of the veritrain binary judge exactly as replays in
// the verifier's own process - the same replay roots, the same verdicts - and still catch cheats.
// Also what verify fetches: each committed state once, however many checks need it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "common/file_io.h"
#include "tests/adversary/support.h"
#include "verifier/check/replay_jobs.h"
#include "verifier/check/verify.h"

namespace vt::adversary {
namespace {

// Every epoch challenged, reproducibly, with `jobs` replays at once in veritrain children.
verifier::VerifyOptions challenge_everything(std::size_t jobs) {
  verifier::VerifyOptions o;
  o.policy.check_probability = 1.0;
  o.seed_hex = "01";
  o.replay_jobs = jobs;
  o.replay_program = VT_BINARY;
  return o;
}

verifier::Verdict verify_workdir(const std::filesystem::path& workdir, const Task& task,
                                 std::size_t jobs) {
  auto source = verifier::open_workdir_source(workdir);
  EXPECT_TRUE(source.ok()) << source.error().message;
  auto v = verifier::verify(**source, task, challenge_everything(jobs));
  EXPECT_TRUE(v.ok()) << v.error().message;
  return v.ok() ? std::move(*v) : verifier::Verdict{};
}

std::vector<std::string> replay_roots(const verifier::Verdict& v) {
  std::vector<std::string> out;
  for (const auto& c : v.checks)
    out.push_back(std::to_string(c.epoch) + ":" + hex_encode(c.replay_root));
  return out;
}

TEST(ParallelReplays, AnHonestRunIsAcceptedWithTheSameReplaysAsInProcess) {
  testing::ScratchDir dir;
  const Task task = tiny_task(21, /*epochs=*/4);
  auto run = write_workdir(task, dir / "wd", {}, provider_key());
  ASSERT_TRUE(run.ok()) << run.error().message;
  // One trainer in the verifier's process, however many epochs it replays: the one that derives
  // the task's initial state, each epoch's start loaded into it (each worker likewise builds one).
  const std::uint64_t built = training::trainers_built();
  const verifier::Verdict here = verify_workdir(run->workdir, task, 1);
  EXPECT_EQ(training::trainers_built() - built, 1u);
  const verifier::Verdict children = verify_workdir(run->workdir, task, 3);
  EXPECT_TRUE(here.accepted) << joined(here.reasons);
  EXPECT_TRUE(children.accepted) << joined(children.reasons);
  ASSERT_EQ(children.checks.size(), 4u);
  EXPECT_EQ(replay_roots(children), replay_roots(here));
  for (std::size_t i = 0; i < children.checks.size(); ++i) {
    EXPECT_EQ(children.checks[i].epoch, i + 1);  // judged and reported in epoch order
    EXPECT_TRUE(children.checks[i].replay_root_matches);
  }
}

TEST(ParallelReplays, CheatsAreCaughtAtTheirEpoch) {
  for (Strategy s :
       {Strategy::kLearningRate, Strategy::kNoise, Strategy::kDataOrder, Strategy::kSkipEpoch}) {
    SCOPED_TRACE(strategy_name(s));
    testing::ScratchDir dir;
    const Task task = tiny_task(22);
    CheatPlan plan;
    plan.cheats[kCheatEpoch] = s;
    auto run = write_workdir(task, dir / "wd", plan, provider_key());
    ASSERT_TRUE(run.ok()) << run.error().message;
    const verifier::Verdict v = verify_workdir(run->workdir, task, 3);
    EXPECT_FALSE(v.accepted);
    ASSERT_EQ(v.checks.size(), 3u);
    EXPECT_TRUE(v.checks[0].passed);
    EXPECT_FALSE(v.checks[1].passed);
    EXPECT_TRUE(v.checks[2].passed) << joined(v.checks[2].failures);
    ASSERT_FALSE(v.reasons.empty());
    EXPECT_NE(v.reasons.front().find("epoch 2"), std::string::npos) << joined(v.reasons);
  }
}

TEST(ParallelReplays, AFailingChildIsAnErrorThatSaysWhy) {
  testing::ScratchDir dir;
  const Task task = tiny_task(23);
  auto run = write_workdir(task, dir / "wd", {}, provider_key());
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto source = verifier::open_workdir_source(run->workdir);
  ASSERT_TRUE(source.ok());
  verifier::VerifyOptions o = challenge_everything(2);
  o.trainer.intra_op_threads = 2;  // an exact-mode task refuses another thread count
  auto v = verifier::verify(**source, task, o);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message.find("replaying epoch 1 in a child process failed"),
            std::string::npos)
      << v.error().message;
  EXPECT_NE(v.error().message.find("thread"), std::string::npos) << v.error().message;

  o.replay_program = "/nonexistent/veritrain";
  auto missing = verifier::verify(**source, task, o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("/nonexistent/veritrain"), std::string::npos)
      << missing.error().message;
}

// Counts the snapshots asked of a source, by root.
class CountingSource final : public verifier::EvidenceSource {
 public:
  explicit CountingSource(verifier::EvidenceSource& inner) : inner_(inner) {}
  Result<std::string> task_json() override { return inner_.task_json(); }
  Result<std::vector<SignedRecord>> log() override { return inner_.log(); }
  Result<Bytes> snapshot(std::uint64_t epoch, const Digest& root,
                         const std::optional<std::pair<Digest, ByteSpan>>& base) override {
    ++asked[hex_encode(root)];
    return inner_.snapshot(epoch, root, base);
  }
  void set_limits(const verifier::SourceLimits& limits) override { inner_.set_limits(limits); }
  std::uint64_t bytes_fetched() const override { return inner_.bytes_fetched(); }
  std::string describe() const override { return inner_.describe(); }
  std::map<std::string, int> asked;

 private:
  verifier::EvidenceSource& inner_;
};

TEST(VerifyFetches, EachCommittedStateOnceWhenEveryEpochIsChallenged) {
  testing::ScratchDir dir;
  const Task task = tiny_task(25, /*epochs=*/4);
  auto run = write_workdir(task, dir / "wd", {}, provider_key());
  ASSERT_TRUE(run.ok()) << run.error().message;
  for (std::size_t jobs : {1u, 3u}) {
    SCOPED_TRACE(jobs);
    auto workdir = verifier::open_workdir_source(run->workdir);
    ASSERT_TRUE(workdir.ok());
    CountingSource counting(**workdir);
    auto v = verifier::verify(counting, task, challenge_everything(jobs));
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_TRUE(v->accepted) << joined(v->reasons);
    // Epochs 0..4: the state after each challenged epoch is the one before the next, and the
    // state after the last is the final model; none is asked for twice.
    EXPECT_EQ(counting.asked.size(), 5u);
    for (const auto& [root, times] : counting.asked) EXPECT_EQ(times, 1) << root;
  }
}

TEST(ParallelReplays, ScratchLeftByAKilledVerifierIsRemovedByTheNextOne) {
  // A process that has exited: its pid is free (and unlikely to be reused within the test).
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const auto abandoned = std::filesystem::temp_directory_path() /
                         ("veritrain-replay-" + std::to_string(dead) + "-test");
  const auto alive = std::filesystem::temp_directory_path() /
                     ("veritrain-replay-" + std::to_string(::getpid()) + "-test");
  std::filesystem::create_directories(abandoned);
  std::filesystem::create_directories(alive);
  ASSERT_TRUE(
      write_file_atomic(abandoned / "epoch-1.before.safetensors", std::string_view("state")).ok());

  testing::ScratchDir dir;
  const Task task = tiny_task(26);
  auto run = write_workdir(task, dir / "wd", {}, provider_key());
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_TRUE(verify_workdir(run->workdir, task, 2).accepted);
  EXPECT_FALSE(std::filesystem::exists(abandoned));
  EXPECT_TRUE(std::filesystem::exists(alive));  // its owner (this test) still runs
  std::filesystem::remove_all(alive);
}

TEST(ParallelReplays, AutomaticJobsFollowCoresAndDevice) {
  Task task = tiny_task(24);
  training::TrainerOptions options;
  EXPECT_EQ(verifier::automatic_replay_jobs(task, options, 1), 1u);
  EXPECT_GE(verifier::automatic_replay_jobs(task, options, 64), 1u);
  EXPECT_LE(verifier::automatic_replay_jobs(task, options, 64),
            std::max(1u, std::thread::hardware_concurrency()));
  options.device = "cuda";
  EXPECT_EQ(verifier::automatic_replay_jobs(task, options, 64), 1u);
  // Memory: a tiny state fits many times; one the size of all memory still gets one job.
  EXPECT_GE(verifier::replay_jobs_that_fit_in_memory(1 << 20), 1u);
  EXPECT_EQ(verifier::replay_jobs_that_fit_in_memory(std::uint64_t{1} << 50), 1u);
}

}  // namespace
}  // namespace vt::adversary
