// `verify --jobs`: replays in child processes of the veritrain binary judge exactly as replays in
// the verifier's own process - the same replay roots, the same verdicts - and still catch cheats.
// Also what verify fetches: each committed state once, however many checks need it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "common/file_io.h"
#include "fingerprint/merkle.h"
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
    with_base += base.has_value() ? 1 : 0;
    return inner_.snapshot(epoch, root, base);
  }
  void set_limits(const verifier::SourceLimits& limits) override { inner_.set_limits(limits); }
  std::uint64_t bytes_fetched() const override { return inner_.bytes_fetched(); }
  std::string describe() const override { return inner_.describe(); }
  std::map<std::string, int> asked;
  int with_base = 0;  // asked as a delta against a state the caller holds

 private:
  verifier::EvidenceSource& inner_;
};

TEST(VerifyFetches, EachCommittedStateOnceWhenEveryEpochIsChallenged) {
  testing::ScratchDir dir;
  const Task task = tiny_task(25, /*epochs=*/4);
  auto run = write_workdir(task, dir / "wd", {}, provider_key());
  ASSERT_TRUE(run.ok()) << run.error().message;
  // Large states (here: every state) wait on disk between their fetch and their use, and in
  // one process the state after an epoch is fetched once its replay is done: still once each.
  for (std::uint64_t large : {verifier::kLargeStateBytes, std::uint64_t{0}}) {
    for (std::size_t jobs : {1u, 3u}) {
      SCOPED_TRACE(std::to_string(jobs) + " jobs, large from " + std::to_string(large));
      auto workdir = verifier::open_workdir_source(run->workdir);
      ASSERT_TRUE(workdir.ok());
      CountingSource counting(**workdir);
      verifier::VerifyOptions o = challenge_everything(jobs);
      o.large_state_bytes = large;
      auto v = verifier::verify(counting, task, o);
      ASSERT_TRUE(v.ok()) << v.error().message;
      EXPECT_TRUE(v->accepted) << joined(v->reasons);
      // Epochs 0..4: the state after each challenged epoch is the one before the next, and the
      // state after the last is the final model; none is asked for twice.
      EXPECT_EQ(counting.asked.size(), 5u);
      for (const auto& [root, times] : counting.asked) EXPECT_EQ(times, 1) << root;
      for (const auto& c : v->checks) EXPECT_TRUE(c.after_fetched) << "epoch " << c.epoch;
      EXPECT_EQ(counting.with_base, large == 0 && jobs == 1 ? 0 : 4)
          << "deltas against the start, but not beside a replay in this process";
    }
  }
}

// A stored state the provider broke is found, and blamed on the same epochs, whether the states
// wait in memory or on disk and whether the state after an epoch is fetched before or after its
// replay.
TEST(VerifyFetches, ABrokenStoredStateIsJudgedAlikeFromDiskAndFromMemory) {
  StoredRun s(27);
  s.task.epochs = 4;
  store(s);
  Result<Bytes> bytes = read_file(s.snapshot(2));
  ASSERT_TRUE(bytes.ok());
  (*bytes)[bytes->size() / 2] ^= 0x10;
  ASSERT_TRUE(write_file_atomic(s.snapshot(2), *bytes).ok());
  std::vector<std::vector<std::string>> failures;
  for (std::uint64_t large : {verifier::kLargeStateBytes, std::uint64_t{0}}) {
    auto workdir = verifier::open_workdir_source(s.workdir());
    ASSERT_TRUE(workdir.ok());
    verifier::VerifyOptions o = challenge_everything(1);
    o.large_state_bytes = large;
    auto v = verifier::verify(**workdir, s.task, o);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_FALSE(v->accepted);
    ASSERT_EQ(v->checks.size(), 4u);
    EXPECT_TRUE(v->checks[0].passed) << joined(v->checks[0].failures);
    EXPECT_FALSE(v->checks[1].passed);
    ASSERT_FALSE(v->checks[1].failures.empty());
    EXPECT_NE(v->checks[1].failures.front().find("epoch 2: the committed snapshot is unusable"),
              std::string::npos)
        << joined(v->checks[1].failures);
    failures.push_back(v->reasons);
  }
  EXPECT_EQ(failures[0], failures[1]);
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

// Automatic --jobs never starts more replays than the memory holds, and says so.
TEST(ParallelReplays, AutomaticJobsFollowMemoryAndSaySo) {
  testing::ScratchDir dir;
  const Task task = tiny_task(28, /*epochs=*/3);
  auto run = write_workdir(task, dir / "wd", {}, provider_key());
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto source = verifier::open_workdir_source(run->workdir);
  ASSERT_TRUE(source.ok());
  verifier::VerifyOptions o = challenge_everything(0);
  o.available_memory = std::uint64_t{100} << 20;  // less than one replay is guessed to take
  std::vector<std::string> said;
  o.on_event = [&](const std::string& line) { said.push_back(line); };
  const std::uint64_t built = training::trainers_built();
  auto v = verifier::verify(**source, task, o);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->accepted) << joined(v->reasons);
  const std::string all = joined(said);
  if (std::thread::hardware_concurrency() >= 2) {
    EXPECT_NE(all.find("memory for 1 replay ("), std::string::npos) << all;
    EXPECT_NE(all.find("guessed"), std::string::npos) << all;
    EXPECT_NE(all.find("replaying one epoch at a time"), std::string::npos) << all;
  }
  EXPECT_EQ(all.find("in child processes"), std::string::npos) << all;
  EXPECT_EQ(training::trainers_built() - built, 1u) << "replayed in this process";
}

// Workers retired while the pool runs leave it working with the rest.
TEST(ParallelReplays, RetiringIdleWorkersKeepsThePoolWorking) {
  testing::ScratchDir dir;
  const Task task = tiny_task(29, /*epochs=*/3);
  auto run = write_workdir(task, dir / "wd", {}, provider_key());
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto here = verify_workdir(run->workdir, task, 1);
  ASSERT_EQ(here.checks.size(), 3u);
  auto pool = verifier::ReplayJobs::create(VT_BINARY, 3, task, {});
  ASSERT_TRUE(pool.ok()) << pool.error().message;
  auto workdir = verifier::open_workdir_source(run->workdir);
  ASSERT_TRUE(workdir.ok());
  auto state = (*workdir)->snapshot(0, run->roots[0], std::nullopt);
  ASSERT_TRUE(state.ok()) << state.error().message;
  ASSERT_TRUE((*pool)->start(1, *state).ok());
  (*pool)->retire_idle(1);  // the busy worker stays
  EXPECT_EQ((*pool)->capacity(), 1u);
  auto replay = (*pool)->finish_oldest();
  ASSERT_TRUE(replay.ok()) << replay.error().message;
  EXPECT_EQ(replay->root, here.checks[0].replay_root);
  EXPECT_GT(replay->peak_rss_bytes, std::uint64_t{1} << 20);
  ASSERT_TRUE(replay->state_file);
  auto again = replay->state_file->read_all();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(fp::merkle_root(*again), replay->root);
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
  const std::uint64_t available = verifier::available_memory();
  EXPECT_GT(available, std::uint64_t{1} << 20);
  EXPECT_GT(verifier::replays_that_fit(available, verifier::replay_peak_guess(1 << 10)), 1u);
  EXPECT_EQ(verifier::replays_that_fit(available, std::uint64_t{1} << 50), 1u);
  EXPECT_EQ(verifier::replays_that_fit(std::uint64_t{10} << 30, std::uint64_t{4} << 30), 2u);
  EXPECT_GT(verifier::peak_resident_bytes(), std::uint64_t{1} << 20);
}

}  // namespace
}  // namespace vt::adversary
