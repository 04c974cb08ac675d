// The provider end to end through the veritrain binary: commitments, log verify, tampering
// reported precisely, and SIGKILL at several points followed by a resume that lands on the same
// roots and bytes as an uninterrupted run.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "protocol/log.h"
#include "protocol/task.h"
#include "tests/test_util.h"

namespace vt {
namespace {
namespace fs = std::filesystem;
using testing::run_command;
using testing::veritrain_binary;

std::string write_task(const testing::ScratchDir& dir, int epochs = 4) {
  auto path = (dir / "task.json").string();
  auto r = run_command(
      veritrain_binary() + " task init --model mlp --epochs " + std::to_string(epochs) +
          " --steps-per-epoch 3 --batch-size 8 --data-option samples=64 --trail-interval 2 --out " +
          path,
      dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

testing::CommandResult train(const testing::ScratchDir& dir, const std::string& task,
                             const fs::path& workdir, const std::string& env = "",
                             const std::string& flags = "") {
  return run_command(env + " " + veritrain_binary() + " --json train --task " + task +
                         " --workdir " + workdir.string() + " " + flags,
                     dir.path());
}

testing::CommandResult log_verify(const testing::ScratchDir& dir, const fs::path& workdir) {
  return run_command(veritrain_binary() + " --json log verify --workdir " + workdir.string(),
                     dir.path());
}

// Everything a resumed run must reproduce: per epoch root, fingerprints, order digest, metrics
// other than time.
std::vector<std::string> commitments(const fs::path& workdir) {
  auto log = read_log(workdir / "commitments.log");
  EXPECT_TRUE(log.ok()) << log.error().message;
  std::vector<std::string> out;
  for (const auto& r : log->records) {
    const CommitRecord& c = r.record;
    out.push_back(std::to_string(c.epoch) + " " + hex_encode(c.root) + " " + c.fingerprint.dump() +
                  " " + c.tracking_fingerprint.dump() + " " + nlohmann::json(c.trail).dump() + " " +
                  hex_encode(c.data_order_digest) + " " + std::to_string(c.metrics.loss) + " " +
                  std::to_string(c.metrics.steps));
  }
  return out;
}

void flip_byte(const fs::path& file, std::size_t offset) {
  auto bytes = *read_file(file);
  bytes.at(offset) ^= 0x01;
  ASSERT_TRUE(write_file_atomic(file, bytes).ok());
}

TEST(Provider, TrainsCommitsAndVerifies) {
  testing::ScratchDir dir;
  auto task = write_task(dir);
  auto r = train(dir, task, dir / "wd");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(R"("message_type":"commit")"), std::string::npos);
  auto summary = nlohmann::json::parse(r.out.substr(r.out.rfind("{\"")));
  EXPECT_EQ(summary["epochs_committed"], 5);  // epoch 0 plus 4

  auto v = log_verify(dir, dir / "wd");
  ASSERT_EQ(v.exit_code, 0) << v.err;
  auto j = nlohmann::json::parse(v.out);
  ASSERT_EQ(j["epochs"].size(), 5u);
  EXPECT_EQ(j["epochs"][0]["codec"], "planes");
  EXPECT_EQ(j["epochs"][1]["codec"], "delta");
  EXPECT_EQ(j["epochs"][4]["codec"], "planes");  // a whole snapshot every 4 epochs

  auto inspect =
      run_command(veritrain_binary() + " --json inspect " + (dir / "wd").string(), dir.path());
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  auto ij = nlohmann::json::parse(inspect.out);
  EXPECT_EQ(ij["task_id"].get<std::string>().size(), 64u);
  EXPECT_EQ(ij["epochs"][2]["epoch"], 2);
  EXPECT_TRUE(fs::exists(dir / "wd" / ij["epochs"][2]["file"].get<std::string>()));

  // Training again is a resume with nothing left to do: same log, nothing rewritten.
  auto before = *read_file(dir / "wd/commitments.log");
  ASSERT_EQ(train(dir, task, dir / "wd").exit_code, 0);
  EXPECT_EQ(*read_file(dir / "wd/commitments.log"), before);
}

TEST(Provider, TamperingIsReportedPrecisely) {
  testing::ScratchDir dir;
  auto task = write_task(dir, 3);
  ASSERT_EQ(train(dir, task, dir / "wd").exit_code, 0);
  auto good_log = *read_file(dir / "wd/commitments.log");

  // One byte in the log, inside epoch 2's record.
  auto log = read_log(dir / "wd/commitments.log");
  flip_byte(dir / "wd/commitments.log", log->records[2].offset + 40);
  auto v = log_verify(dir, dir / "wd");
  EXPECT_EQ(v.exit_code, 1) << v.err;
  EXPECT_NE(v.err.find("epoch 2"), std::string::npos) << v.err;
  ASSERT_TRUE(write_file_atomic(dir / "wd/commitments.log", good_log).ok());

  // One byte in a stored snapshot: a finding, not an error: on stdout, the epoch and the file
  // named, and every epoch that cannot be had without it listed too.
  auto root1 = hex_encode(log->records[1].record.root);
  auto file = dir / "wd/snapshots" / (root1 + ".vtc");
  auto size = fs::file_size(file);
  flip_byte(file, size - 10);
  v = log_verify(dir, dir / "wd");
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_EQ(v.err.find("error"), std::string::npos) << v.err;
  {
    const auto found = nlohmann::json::parse(v.out);
    EXPECT_FALSE(found["ok"].get<bool>());
    ASSERT_GE(found["unusable"].size(), 1u) << v.out;
    const std::string first = found["unusable"][0];
    EXPECT_EQ(first.rfind("epoch 1: snapshots/" + root1 + ".vtc: ", 0), 0u) << first;
    EXPECT_TRUE(found["epochs"][1].contains("problem")) << v.out;
    EXPECT_FALSE(found["epochs"][0].contains("problem")) << v.out;
  }
  auto human = run_command(veritrain_binary() + " log verify --workdir " + (dir / "wd").string(),
                           dir.path());
  EXPECT_EQ(human.exit_code, 1);
  EXPECT_NE(human.out.find("committed snapshots are unusable:\n  epoch 1: "), std::string::npos)
      << human.out;
  // `inspect` of that container checks its payload too: exit 1, the damage named. It used to
  // describe the header and exit 0.
  auto described = run_command(veritrain_binary() + " inspect " + file.string(), dir.path());
  EXPECT_EQ(described.exit_code, 1) << described.out << described.err;
  EXPECT_NE(described.out.find("CORRUPT: "), std::string::npos) << described.out;
  flip_byte(file, size - 10);
  described = run_command(veritrain_binary() + " inspect " + file.string(), dir.path());
  EXPECT_EQ(described.exit_code, 0) << described.out << described.err;
  EXPECT_NE(described.out.find("checksums hold"), std::string::npos) << described.out;
  ASSERT_EQ(log_verify(dir, dir / "wd").exit_code, 0);

  // One byte in the task: it no longer matches what the log commits to.
  auto task_text = *read_text_file(dir / "wd/task.json");
  auto pos = task_text.find("\"seed\": 0");
  ASSERT_NE(pos, std::string::npos);
  task_text[pos + 8] = '1';
  ASSERT_TRUE(write_file_atomic(dir / "wd/task.json", task_text).ok());
  v = log_verify(dir, dir / "wd");
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_NE(v.err.find("task.json hashes to"), std::string::npos) << v.err;
}

TEST(Provider, RefusesAWorkdirOfAnotherTaskOrWithAMissingSnapshot) {
  testing::ScratchDir dir;
  auto task = write_task(dir, 2);
  ASSERT_EQ(train(dir, task, dir / "wd").exit_code, 0);
  auto other = (dir / "other.json").string();
  ASSERT_EQ(
      run_command(veritrain_binary() + " task init --model mlp --epochs 2 --seed 5 --out " + other,
                  dir.path())
          .exit_code,
      0);
  auto log_before = *read_file(dir / "wd/commitments.log");
  auto r = train(dir, other, dir / "wd");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds task"), std::string::npos) << r.err;
  EXPECT_EQ(*read_file(dir / "wd/commitments.log"), log_before);

  // Resuming needs the last committed snapshot; a task with more epochs resumes after epoch 2.
  auto log = read_log(dir / "wd/commitments.log");
  fs::remove(dir / "wd/snapshots" / (hex_encode(log->records.back().record.root) + ".vtc"));
  auto v = log_verify(dir, dir / "wd");
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_NE(v.out.find("epoch 2: snapshots/"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("snapshot file is missing"), std::string::npos) << v.out;
}

// A run that stopped before committing anything (here a cuda task on a machine without CUDA)
// leaves a folder bound to no commitment: the corrected task trains there. It used to be refused
// as "a workdir of another task".
TEST(Provider, AWorkdirWhoseRunCommittedNothingTakesTheCorrectedTask) {
  testing::ScratchDir dir;
  const std::string task = write_task(dir, 1);
  auto j = nlohmann::json::parse(*read_text_file(task));
  j["device"] = "cuda";
  const std::string cuda = (dir / "cuda.json").string();
  ASSERT_TRUE(write_file_atomic(cuda, j.dump(2)).ok());
  auto failed = train(dir, cuda, dir / "wd");
  if (failed.exit_code == 0) GTEST_SKIP() << "this machine trains cuda tasks";
  EXPECT_FALSE(fs::exists(dir / "wd/commitments.log") &&
               fs::file_size(dir / "wd/commitments.log") > 0);
  auto fixed = train(dir, task, dir / "wd");
  EXPECT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_EQ(log_verify(dir, dir / "wd").exit_code, 0);
}

struct CrashCase {
  std::string point;
  int epoch;
};

class ProviderCrash : public ::testing::TestWithParam<CrashCase> {};

TEST_P(ProviderCrash, SigkillThenResumeMatchesAnUninterruptedRun) {
  testing::ScratchDir dir;
  auto task = write_task(dir, 4);
  ASSERT_EQ(train(dir, task, dir / "reference").exit_code, 0);

  const CrashCase& c = GetParam();
  auto crashed =
      train(dir, task, dir / "wd", "VT_CRASH_AT=" + c.point + ":" + std::to_string(c.epoch));
  EXPECT_EQ(crashed.exit_code, 128 + 9) << "expected SIGKILL at " << c.point << "\n" << crashed.err;
  auto resumed = train(dir, task, dir / "wd");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(commitments(dir / "wd"), commitments(dir / "reference"));
  ASSERT_EQ(log_verify(dir, dir / "wd").exit_code, 0);
  // The final model is byte-identical: same root, same stored container content.
  auto ref = read_log(dir / "reference/commitments.log");
  auto root = hex_encode(ref->records.back().record.root);
  EXPECT_TRUE(fs::exists(dir / "wd/snapshots" / (root + ".vtc")));
}

INSTANTIATE_TEST_SUITE_P(
    Points, ProviderCrash,
    ::testing::Values(CrashCase{"during_training", 2}, CrashCase{"before_snapshot_write", 2},
                      CrashCase{"after_snapshot_write", 2}, CrashCase{"after_log_append", 2},
                      CrashCase{"after_snapshot_write", 0}, CrashCase{"during_training", 4}),
    [](const auto& info) { return info.param.point + "_" + std::to_string(info.param.epoch); });

// A state streamed out of the live tensors (no copy held) is committed and stored exactly as the
// copy committed in the background is: the same records, the same container bytes (deltas coded
// against the previous epoch read back from disk), also across a kill and a resume.
TEST(Provider, StreamedCommitsAreTheOverlappedOnesByteForByte) {
  testing::ScratchDir dir;
  auto task = write_task(dir, 5);
  ASSERT_EQ(train(dir, task, dir / "overlap", "", "--commit-mode overlap").exit_code, 0);
  auto streamed = train(dir, task, dir / "stream", "", "--commit-mode stream");
  ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
  EXPECT_EQ(commitments(dir / "stream"), commitments(dir / "overlap"));
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir / "overlap/snapshots")) {
    const fs::path twin = dir / "stream/snapshots" / entry.path().filename();
    ASSERT_TRUE(fs::exists(twin)) << twin;
    EXPECT_EQ(*read_file(twin), *read_file(entry.path())) << twin;
    ++files;
  }
  EXPECT_EQ(files, 6u);
  EXPECT_EQ(log_verify(dir, dir / "stream").exit_code, 0);

  for (const char* point : {"before_snapshot_write:2", "after_snapshot_write:3"}) {
    const fs::path wd = dir / (std::string("crash-") + point);
    auto crashed =
        train(dir, task, wd, std::string("VT_CRASH_AT=") + point, "--commit-mode stream");
    EXPECT_EQ(crashed.exit_code, 128 + 9) << point << "\n" << crashed.err;
    // The container written before the kill is found again under its root on resume; one
    // broken since (a flipped byte past its head) is not kept but written anew.
    auto reference = read_log(dir / "overlap/commitments.log");
    ASSERT_TRUE(reference.ok());
    const fs::path epoch3 =
        wd / "snapshots" / (hex_encode(reference->records.at(3).record.root) + ".vtc");
    if (std::string(point) == "after_snapshot_write:3") {
      ASSERT_TRUE(fs::exists(epoch3));
      Bytes broken = *read_file(epoch3);
      broken[broken.size() - 3] ^= 0x10;
      ASSERT_TRUE(write_file_atomic(epoch3, broken).ok());
    }
    auto resumed = train(dir, task, wd, "", "--commit-mode stream");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_EQ(commitments(wd), commitments(dir / "overlap")) << point;
    EXPECT_EQ(log_verify(dir, wd).exit_code, 0) << point;
    for (const auto& entry : fs::directory_iterator(dir / "overlap/snapshots")) {
      const fs::path twin = wd / "snapshots" / entry.path().filename();
      EXPECT_EQ(*read_file(twin), *read_file(entry.path())) << point << ": " << twin;
    }
  }
}

// A full disk ends training with a clear I/O error and leaves a log that still verifies.
TEST(Provider, DiskFullIsAClearErrorAndTheLogStaysValid) {
  testing::ScratchDir dir;
  fs::create_directories(dir / "small");
  if (std::system(("mount -t tmpfs -o size=600k tmpfs " + (dir / "small").string() + " 2>/dev/null")
                      .c_str()) != 0) {
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root and a permissive sandbox)";
  }
  struct Unmount {
    fs::path p;
    ~Unmount() { std::system(("umount " + p.string()).c_str()); }
  } unmount{dir / "small"};
  auto task = (dir / "task.json").string();
  ASSERT_EQ(
      run_command(veritrain_binary() +
                      " task init --model mlp --option hidden=256 --epochs 30 --steps-per-epoch 1 "
                      "--batch-size 8 --data-option samples=16 --out " +
                      task,
                  dir.path())
          .exit_code,
      0);
  auto r = train(dir, task, dir / "small/wd");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("disk full"), std::string::npos) << r.err;
  auto v = log_verify(dir, dir / "small/wd");
  EXPECT_EQ(v.exit_code, 0) << v.err;
  auto j = nlohmann::json::parse(v.out);
  EXPECT_GT(j["records"].get<int>(), 0);
  EXPECT_LT(j["records"].get<int>(), 31);
}

TEST(Provider, TornLogTailIsRecoveredOnResume) {
  testing::ScratchDir dir;
  auto task = write_task(dir, 3);
  ASSERT_EQ(train(dir, task, dir / "reference").exit_code, 0);
  ASSERT_EQ(train(dir, task, dir / "wd", "VT_CRASH_AT=after_log_append:2").exit_code, 128 + 9);
  // Simulate a crash in the middle of the next append: half a record without its newline.
  {
    std::ofstream out(dir / "wd/commitments.log", std::ios::app | std::ios::binary);
    out << R"({"data_order_digest":"00)";
  }
  auto v = log_verify(dir, dir / "wd");
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.out.find("torn_tail"), std::string::npos);
  auto resumed = train(dir, task, dir / "wd");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(commitments(dir / "wd"), commitments(dir / "reference"));
}

}  // namespace
}  // namespace vt

namespace vt {
namespace {

TEST(Provider, InspectExportsAnEpochAsCanonicalSafetensors) {
  testing::ScratchDir dir;
  auto task = write_task(dir, 2);
  ASSERT_EQ(train(dir, task, dir / "wd").exit_code, 0);
  auto out = (dir / "e1.safetensors").string();
  auto r = run_command(
      veritrain_binary() + " --json inspect " + (dir / "wd").string() + " --epoch 1 --out " + out,
      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto log = read_log(dir / "wd/commitments.log");
  EXPECT_EQ(nlohmann::json::parse(r.out)["root"], hex_encode(log->records[1].record.root));
  auto described = run_command(veritrain_binary() + " --json inspect " + out, dir.path());
  ASSERT_EQ(described.exit_code, 0);
  auto j = nlohmann::json::parse(described.out);
  EXPECT_EQ(j["kind"], "safetensors");
  EXPECT_TRUE(j["canonical"].get<bool>());
  EXPECT_EQ(j["metadata"]["epoch"], "1");
  auto beyond = run_command(
      veritrain_binary() + " inspect " + (dir / "wd").string() + " --epoch 9 --out " + out,
      dir.path());
  EXPECT_EQ(beyond.exit_code, 2);
}

}  // namespace
}  // namespace vt
