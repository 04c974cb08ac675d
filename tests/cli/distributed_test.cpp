// Gradient groups and ranks (docs/training.md, "Gradient groups"): a task with G groups gives
// the same roots on 1, 2 and 4 ranks, a 2-rank workdir verifies against a one-process replay,
// and the failures a run of several processes adds (a rank that dies, a rank that computes
// something else) stop it loudly and leave a workdir that resumes to the same roots.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>

#include "common/file_io.h"
#include "common/json.h"
#include "common/process.h"
#include "tests/cli/model_fixtures.h"
#include "tests/cli/reference_util.h"
#include "tests/test_util.h"

namespace vt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_command;
using testing::veritrain_binary;

// Tiny configurations: 2 epochs of 2 steps, a batch of 8 in 4 groups of 2; `extra` goes to
// task init as it is (another determinism, dropout).
std::string grouped_task(const testing::ScratchDir& dir, const std::string& model,
                         const std::string& extra = "") {
  const std::string options = model == "mlp" ? " --option hidden=8 --option layers=1"
                              : model == "cnn"
                                  ? " --option width=4 --option blocks=1"
                                  : " --option d_model=16 --option layers=1 --option heads=2 "
                                    "--option seq_len=8 --option vocab=16";
  std::string file = (dir / (model + ".json")).string();
  auto init = run_command(veritrain_binary() + " task init --model " + model + options +
                              " --epochs 2 --steps-per-epoch 2 --batch-size 8 --data-option "
                              "samples=32 --seed 5 --k 128 " +
                              extra + " --out " + file,
                          dir.path());
  EXPECT_EQ(init.exit_code, 0) << init.err;
  json task = json::parse(*read_text_file(file));
  task["gradient_groups"] = 4;
  task["fingerprint"]["tracking_k"] = 128;
  EXPECT_TRUE(write_file_atomic(file, task.dump()).ok());
  return file;
}

std::vector<std::string> workdir_roots(const fs::path& workdir) {
  return reference::committed_roots(workdir / "commitments.log");
}

testing::CommandResult train(const testing::ScratchDir& dir, const std::string& task,
                             const fs::path& workdir, int nproc, const std::string& env = "") {
  return run_command(env + " " + veritrain_binary() + " train --task " + task + " --workdir " +
                         workdir.string() + " --nproc " + std::to_string(nproc) +
                         " --rank-timeout 30",
                     dir.path());
}

testing::CommandResult verify(const testing::ScratchDir& dir, const std::string& task,
                              const fs::path& workdir) {
  return run_command(veritrain_binary() + " --json verify --task " + task + " --workdir " +
                         workdir.string() + " --check-probability 1 --force --report " +
                         (dir / "report").string(),
                     dir.path());
}

void same_roots_on_one_two_four_ranks(const std::string& model, const std::string& extra = "") {
  testing::ScratchDir dir;
  const std::string task = grouped_task(dir, model, extra);
  std::vector<std::vector<std::string>> roots;
  for (int w : {1, 2, 4}) {
    fs::path work = dir / "w";
    work += std::to_string(w);
    auto r = train(dir, task, work, w);
    ASSERT_EQ(r.exit_code, 0) << "W=" << w << ": " << r.err;
    roots.push_back(workdir_roots(work));
    ASSERT_EQ(roots.back().size(), 3u) << "W=" << w;
  }
  EXPECT_EQ(roots[0], roots[1]) << model << ": W=2 against W=1";
  EXPECT_EQ(roots[0], roots[2]) << model << ": W=4 against W=1";
  // One process replays the 4-rank run's every epoch exactly.
  auto v = verify(dir, task, dir / "w4");
  ASSERT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_EQ(json::parse(v.out)["result"], "accepted");
}

TEST(Distributed, MlpSameRootsOnOneTwoFourRanks) { same_roots_on_one_two_four_ranks("mlp"); }
TEST(Distributed, CnnWithBatchNormSameRootsOnOneTwoFourRanks) {
  same_roots_on_one_two_four_ranks("cnn");
}
TEST(Distributed, GptSameRootsOnOneTwoFourRanks) { same_roots_on_one_two_four_ranks("gpt"); }

// Portable arithmetic (docs/portable.md) on ranks: G = 4 on 1, 2 and 4 ranks, the same roots.
TEST(Distributed, PortableMlpSameRootsOnOneTwoFourRanks) {
  same_roots_on_one_two_four_ranks("mlp", "--determinism portable");
}
TEST(Distributed, PortableCnnSameRootsOnOneTwoFourRanks) {
  same_roots_on_one_two_four_ranks("cnn", "--determinism portable");
}
TEST(Distributed, PortableGptWithDropoutSameRootsOnOneTwoFourRanks) {
  same_roots_on_one_two_four_ranks("gpt", "--determinism portable --option dropout_permille=100");
}

// The recipes on ranks: clipping takes the global norm of the reduced gradient, the same on every
// rank, whichever arithmetic sums the groups; every rank augments the whole batch alike and moves
// the same average.
constexpr const char* kRecipes =
    " --weight-decay 0.05 --clip-grad-norm 0.05 --no-decay 1d --label-smoothing 0.1 "
    "--ema-decay 0.9";
TEST(Distributed, GptRecipesSameRootsOnOneTwoFourRanks) {
  same_roots_on_one_two_four_ranks("gpt", kRecipes);
}
TEST(Distributed, PortableCnnRecipesSameRootsOnOneTwoFourRanks) {
  same_roots_on_one_two_four_ranks(
      "cnn",
      std::string("--determinism portable --clip-norm inf --crop-padding 4 --flip") + kRecipes);
}

// One process replays the 2-rank run's epochs (G groups in a row, the same tree) bit for bit;
// a stored snapshot changed afterwards is caught.
TEST(Distributed, TwoRankWorkdirVerifiesExactlyAndATamperedEpochIsRejected) {
  testing::ScratchDir dir;
  const std::string task = grouped_task(dir, "cnn");
  const fs::path work = dir / "w";
  auto r = run_command(veritrain_binary() + " train --task " + task + " --workdir " +
                           work.string() + " --nproc 2 --full-every 1",
                       dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ok = verify(dir, task, work);
  ASSERT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_EQ(json::parse(ok.out)["result"], "accepted");

  const auto roots = workdir_roots(work);
  ASSERT_EQ(roots.size(), 3u);
  const fs::path file = work / "snapshots" / (roots[2] + ".vtc");
  Bytes bytes = *read_file(file);
  bytes[bytes.size() - 20] ^= 0x40;
  ASSERT_TRUE(write_file_atomic(file, bytes).ok());
  auto bad = verify(dir, task, work);
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("epoch 2"), std::string::npos) << bad.out;
}

// A TorchScript module whose branch depends on the data: a group takes `a` or `b` by the sign
// of its first feature, so in one step a parameter can get a gradient in one rank's groups and
// none in the other's. Every rank must still treat it as one process running all G groups does
// (reached if any group reached it), or the ranks diverge in the optimizer update.
constexpr const char* kBranchy = R"PY(
import sys, torch
class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 4)
        self.b = torch.nn.Linear(32, 4)
    def forward(self, x):
        if bool(x[0, 0] > 0):
            return self.a(x)
        return self.b(x)
torch.manual_seed(0)
torch.jit.script(Branchy()).save(sys.argv[1])
)PY";

TEST(Distributed, DataDependentBranchSameRootsOnOneAndTwoRanks) {
  if (!testing::have_python_modules("torch"))
    GTEST_SKIP() << "python3-torch not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  ASSERT_TRUE(write_file_atomic(dir / "branchy.py", as_bytes(kBranchy)).ok());
  auto py = run_command(
      testing::kPython + " " + (dir / "branchy.py").string() + " " + (dir / "branchy.pt").string(),
      dir.path());
  ASSERT_EQ(py.exit_code, 0) << py.err;
  const std::string file = (dir / "task.json").string();
  auto init = run_command(
      veritrain_binary() + " task init --model torchscript --model-file " +
          (dir / "branchy.pt").string() +
          " --epochs 2 --steps-per-epoch 4 --batch-size 8 --data-option samples=64 --seed 5 --k 128"
          " --gradient-groups 4 --out " +
          file,
      dir.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  json task = json::parse(*read_text_file(file));
  task["fingerprint"]["tracking_k"] = 128;
  ASSERT_TRUE(write_file_atomic(file, task.dump()).ok());
  auto one = train(dir, file, dir / "w1", 1);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto two = train(dir, file, dir / "w2", 2);
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(workdir_roots(dir / "w2"), workdir_roots(dir / "w1"));
  EXPECT_EQ(workdir_roots(dir / "w2").size(), 3u);
}

// The roots of the same task trained on 2 ranks without interruption: what a resumed run must
// reach.
std::vector<std::string> uninterrupted_roots(const testing::ScratchDir& dir,
                                             const std::string& task) {
  auto whole = train(dir, task, dir / "whole", 2);
  EXPECT_EQ(whole.exit_code, 0) << whole.err;
  return workdir_roots(dir / "whole");
}

// A rank killed in epoch 2 stops the run within the rank timeout, with a message naming it;
// `train` again resumes after epoch 1 and lands on the uninterrupted roots.
TEST(Distributed, KilledRankStopsTheRunAndTrainResumesToTheSameRoots) {
  testing::ScratchDir dir;
  const std::string task = grouped_task(dir, "mlp");
  const auto expected = uninterrupted_roots(dir, task);
  ASSERT_EQ(expected.size(), 3u);

  const fs::path work = dir / "w";
  const auto start = std::chrono::steady_clock::now();
  auto crashed = train(dir, task, work, 2, "VT_CRASH_AT=during_training:2 VT_CRASH_RANK=1");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(crashed.exit_code, 0);
  EXPECT_NE(crashed.err.find("rank 1 was killed by signal 9"), std::string::npos) << crashed.err;
  EXPECT_LT(seconds, 30.0);
  // Epoch 0 was durable before epoch 2 started; epoch 1's may have been in flight.
  const auto before = workdir_roots(work);
  EXPECT_GE(before.size(), 1u);
  EXPECT_LE(before.size(), 2u);

  auto resumed = train(dir, task, work, 2);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(workdir_roots(work), expected);
}

// The launcher killed outright (kill -9, so it stops nobody) takes its ranks with it within
// seconds: none trains on or holds the workdir's lock, and `train` again resumes to the same
// roots. Rank 1 freezes itself in epoch 2 (VT_CRASH_SIGNAL=STOP) to hold the run open; a frozen
// rank must go too.
TEST(Distributed, KilledLauncherTakesItsRanksWithItAndTrainResumes) {
  testing::ScratchDir dir;
  const std::string task = grouped_task(dir, "mlp");
  const auto expected = uninterrupted_roots(dir, task);
  ASSERT_EQ(expected.size(), 3u);

  const fs::path work = dir / "w";
  // Prints the ranks' pids, then "gone" once none is left (a zombie counts as gone) or "alive".
  const std::string script =
      "VT_CRASH_AT=during_training:2 VT_CRASH_RANK=1 VT_CRASH_SIGNAL=STOP " + veritrain_binary() +
      " train --task " + task + " --workdir " + work.string() + " --nproc 2 --rank-timeout 60 >" +
      (dir / "launcher.log").string() +
      " 2>&1 & L=$!\n"
      "R=''\n"
      "for i in $(seq 300); do\n"
      "  R=$(pgrep -P $L | tr '\\n' ' ')\n"
      "  for p in $R; do case $(ps -o stat= -p $p) in T*) break 2;; esac; done\n"
      "  sleep 0.1\n"
      "done\n"
      "echo \"ranks: $R\"\n"
      "kill -9 $L\n"
      "for i in $(seq 50); do\n"
      "  left=''\n"
      "  for p in $R; do case $(ps -o stat= -p $p) in ''|Z*) ;; *) left=\"$left $p\";; esac; done\n"
      "  [ -z \"$left\" ] && { echo gone; exit 0; }\n"
      "  sleep 0.1\n"
      "done\n"
      "echo \"alive:$left\"; kill -9 $left\n";
  ASSERT_TRUE(write_file_atomic(dir / "kill_launcher.sh", as_bytes(script)).ok());
  auto r = run_command("bash " + (dir / "kill_launcher.sh").string(), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string ranks_line = r.out.substr(0, r.out.find('\n'));
  EXPECT_EQ(ranks_line.rfind("ranks: ", 0), 0u) << r.out;
  EXPECT_EQ(std::count(ranks_line.begin(), ranks_line.end(), ' '), 3)
      << "two ranks expected: " << r.out;
  EXPECT_NE(r.out.find("gone"), std::string::npos)
      << r.out << *read_text_file(dir / "launcher.log");

  auto resumed = train(dir, task, work, 2);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(workdir_roots(work), expected);
}

// Ranks started by hand, as on several machines: torchrun's environment variables for one,
// the flags for the other; the same roots as one process.
TEST(Distributed, RanksStartedByHandWithEnvAndFlags) {
  testing::ScratchDir dir;
  const std::string task = grouped_task(dir, "gpt");
  ASSERT_EQ(train(dir, task, dir / "one", 1).exit_code, 0);
  auto port = free_loopback_port();
  ASSERT_TRUE(port.ok());
  const std::string p = std::to_string(*port);
  const std::string work = (dir / "w").string();
  auto r = run_command("( " + veritrain_binary() + " train --task " + task + " --workdir " + work +
                           " --rank 1 --world-size 2 --master-port " + p + " --rank-timeout 30 >" +
                           (dir / "rank1.log").string() +
                           " 2>&1 & RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + p +
                           " " + veritrain_binary() + " train --task " + task + " --workdir " +
                           work + " --rank-timeout 30; status=$?; wait; exit $status )",
                       dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err << *read_text_file(dir / "rank1.log");
  EXPECT_EQ(workdir_roots(work), workdir_roots(dir / "one"));
  EXPECT_EQ(workdir_roots(work).size(), 3u);
}

// A rank that hangs (SIGSTOP) rather than dies: rank 0 waits --rank-timeout for it, then says
// which rank did not answer, and the launcher stops the rest.
TEST(Distributed, HungRankStopsTheRunAfterTheRankTimeout) {
  testing::ScratchDir dir;
  const std::string task = grouped_task(dir, "mlp");
  const auto start = std::chrono::steady_clock::now();
  auto r = run_command("VT_CRASH_AT=during_training:2 VT_CRASH_RANK=1 VT_CRASH_SIGNAL=STOP " +
                           veritrain_binary() + " train --task " + task + " --workdir " +
                           (dir / "w").string() + " --nproc 2 --rank-timeout 4",
                       dir.path());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("exchanging gradients: rank 1 did not answer within 4 s"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("rank 0 exited"), std::string::npos) << r.err;
  EXPECT_LT(seconds, 40.0);
}

// A rank whose state differs after an epoch (injected: VT_TEST_FAULTY_RANK) stops every rank
// before rank 0 commits that epoch.
TEST(Distributed, RankWithAnotherStateIsDetectedBeforeTheCommitment) {
  testing::ScratchDir dir;
  const std::string task = grouped_task(dir, "mlp");
  const fs::path work = dir / "w";
  auto r = train(dir, task, work, 2, "VT_TEST_FAULTY_RANK=1:2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("the ranks disagree on the state after epoch 2"), std::string::npos)
      << r.err;
  EXPECT_LT(workdir_roots(work).size(), 3u) << "epoch 2 must not be committed";
}

// `task init --gradient-groups 2 --world-size 2`: the task's world_size is how many ranks a
// plain `train` starts (seen through the faulty-rank hook, which only a second rank can trip),
// and it is not part of the task_id.
TEST(Distributed, TaskWorldSizeIsHowManyRanksTrainStarts) {
  testing::ScratchDir dir;
  const std::string file = (dir / "task.json").string();
  auto init = run_command(
      veritrain_binary() +
          " --json task init --model mlp --option hidden=8 --option layers=1 --epochs 1 "
          "--steps-per-epoch 2 --batch-size 4 --data-option samples=16 --k 64 "
          "--gradient-groups 2 --world-size 2 --out " +
          file,
      dir.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  json task = json::parse(*read_text_file(file));
  EXPECT_EQ(task["world_size"], 2);
  EXPECT_EQ(task["gradient_groups"], 2);
  task["fingerprint"]["tracking_k"] = 64;
  ASSERT_TRUE(write_file_atomic(file, task.dump()).ok());
  auto r = run_command("VT_TEST_FAULTY_RANK=1:1 " + veritrain_binary() + " train --task " + file +
                           " --workdir " + (dir / "w").string() + " --rank-timeout 30",
                       dir.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("the ranks disagree"), std::string::npos) << r.err;
  task.erase("world_size");
  ASSERT_TRUE(write_file_atomic(file, task.dump()).ok());
  auto alone = run_command("VT_TEST_FAULTY_RANK=1:1 " + veritrain_binary() + " train --task " +
                               file + " --workdir " + (dir / "w").string(),
                           dir.path());
  EXPECT_EQ(alone.exit_code, 0) << "one process, the same task_id, resumes the same workdir: "
                                << alone.err;
}

// Groups run one at a time, so a step's peak memory is one group's: G = 8 needs less than
// G = 1 for the same batch of 64 (measured by `estimate`'s counting allocator).
TEST(Distributed, EstimatePeakWithEightGroupsIsBelowOneGroup) {
  testing::ScratchDir dir;
  const std::string file = (dir / "task.json").string();
  ASSERT_EQ(run_command(veritrain_binary() +
                            " task init --model cnn --option width=8 --option blocks=1 --epochs 1 "
                            "--batch-size 64 --data-option samples=128 --out " +
                            file,
                        dir.path())
                .exit_code,
            0);
  std::map<int, std::uint64_t> peak;
  for (int g : {1, 8}) {
    json task = json::parse(*read_text_file(file));
    task["gradient_groups"] = g;
    const std::string path = (dir / (std::to_string(g) + "groups.json")).string();
    ASSERT_TRUE(write_file_atomic(path, task.dump()).ok());
    auto r = run_command(veritrain_binary() + " --json estimate --task " + path, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["gradient_groups"], g);
    EXPECT_EQ(j["examples_per_group"], 64 / g);
    peak[g] = j["step_peak_bytes"].get<std::uint64_t>();
  }
  std::cout << "cnn width 8, batch 64: step peak G=1 " << peak[1] << " bytes, G=8 " << peak[8]
            << " bytes\n";
  EXPECT_LT(peak[8], peak[1]);
}

}  // namespace
}  // namespace vt
