// The binary's contract with its users: exit codes, --help, --version, --json.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "tests/test_util.h"

namespace vt {
namespace {

using testing::run_command;
using testing::veritrain_binary;

TEST(Cli, HelpListsCommandsAndExitsZero) {
  testing::ScratchDir dir;
  auto r = run_command(veritrain_binary() + " --help", dir.path());
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("keygen"), std::string::npos);
  EXPECT_NE(r.out.find("Exit codes"), std::string::npos);
}

TEST(Cli, UnknownCommandIsUsageErrorWithHint) {
  testing::ScratchDir dir;
  auto r = run_command(veritrain_binary() + " frobnicate", dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("veritrain --help"), std::string::npos) << r.err;
}

TEST(Cli, VersionNamesLibtorchAndCuda) {
  testing::ScratchDir dir;
  auto r = run_command(veritrain_binary() + " --version", dir.path());
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("veritrain 0."), std::string::npos);
  EXPECT_NE(r.out.find("libtorch "), std::string::npos);
  EXPECT_NE(r.out.find("cuda "), std::string::npos);
  auto j = run_command(veritrain_binary() + " --json --version", dir.path());
  auto parsed = nlohmann::json::parse(j.out);
  EXPECT_TRUE(parsed.contains("libtorch"));
  EXPECT_TRUE(parsed["cuda_available"].is_boolean());
}

TEST(Cli, KeygenWritesKeysAndRefusesToOverwrite) {
  testing::ScratchDir dir;
  auto keys = (dir / "keys").string();
  auto r = run_command(veritrain_binary() + " --json keygen --out " + keys, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["signing_public_key_sha256"].get<std::string>().size(), 64u);
  EXPECT_TRUE(std::filesystem::exists(dir / "keys/tls.cert.pem"));
  auto again = run_command(veritrain_binary() + " keygen --out " + keys, dir.path());
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("refusing to overwrite"), std::string::npos);
}

TEST(Cli, MissingRequiredOptionIsUsageError) {
  testing::ScratchDir dir;
  auto r = run_command(veritrain_binary() + " keygen", dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out"), std::string::npos);
}

}  // namespace
}  // namespace vt

namespace vt {
namespace {

TEST(CliTask, InitWritesAValidTaskThatShowReadsBack) {
  testing::ScratchDir dir;
  auto task = (dir / "task.json").string();
  auto init = testing::run_command(
      testing::veritrain_binary() +
          " task init --model mlp --epochs 2 --seed 0x10 --option hidden=8 --out " + task,
      dir.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  EXPECT_NE(init.err.find("task_id"), std::string::npos);
  auto show =
      testing::run_command(testing::veritrain_binary() + " --json task show " + task, dir.path());
  ASSERT_EQ(show.exit_code, 0) << show.err;
  auto j = nlohmann::json::parse(show.out);
  EXPECT_EQ(j["task_id"].get<std::string>().size(), 64u);
  EXPECT_EQ(j["task"]["epochs"], 2);
  EXPECT_EQ(j["task"]["seed"], 16);
  EXPECT_EQ(j["task"]["model"]["options"]["hidden"], 8);
}

// Regression: the default tracking_k (256) was below the number of tensors of a 12-layer GPT
// with AdamW (450), and train failed at epoch 0. init now sizes k to cover the model.
TEST(CliTask, FingerprintSizesCoverEveryTensorOfADeepModel) {
  testing::ScratchDir dir;
  auto r = testing::run_command(
      testing::veritrain_binary() + " task init --model gpt --option layers=12", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GE(j["fingerprint"]["tracking_k"].get<int>(), 450);
  EXPECT_GE(j["fingerprint"]["k"].get<int>(), 450);
  auto too_small = testing::run_command(
      testing::veritrain_binary() + " task init --model gpt --option layers=12 --k 100",
      dir.path());
  EXPECT_EQ(too_small.exit_code, 2);
  EXPECT_NE(too_small.err.find("450 floating-point tensors"), std::string::npos) << too_small.err;
}

TEST(CliTask, BadInputNamesTheFieldAndExitsTwo) {
  testing::ScratchDir dir;
  auto bad_option = testing::run_command(
      testing::veritrain_binary() + " task init --model cnn --option depth=3", dir.path());
  EXPECT_EQ(bad_option.exit_code, 2);
  EXPECT_NE(bad_option.err.find("model.options.depth"), std::string::npos) << bad_option.err;
  auto file = dir / "broken.json";
  std::ofstream(file)
      << R"({"model": {"name": "mlp"}, "dataset": {"name": "synthetic"}, "epochs": "three", "batch_size": 4})";
  auto show =
      testing::run_command(testing::veritrain_binary() + " task show " + file.string(), dir.path());
  EXPECT_EQ(show.exit_code, 2);
  EXPECT_NE(show.err.find("epochs"), std::string::npos) << show.err;
  auto missing = testing::run_command(
      testing::veritrain_binary() + " task show " + (dir / "nope.json").string(), dir.path());
  EXPECT_EQ(missing.exit_code, 2);  // the caller's own input (docs/cli.md, "Exit codes")
  EXPECT_NE(missing.err.find("nope.json: no such file"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace vt

namespace vt {
namespace {

TEST(CliEstimate, MeasuresConv3dStateAndStepMemory) {
  testing::ScratchDir dir;
  auto task = (dir / "task.json").string();
  ASSERT_EQ(testing::run_command(testing::veritrain_binary() +
                                     " task init --model conv3d --option size=16 --out " + task,
                                 dir.path())
                .exit_code,
            0);
  auto r = testing::run_command(testing::veritrain_binary() + " --json estimate --task " + task,
                                dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  // 1->4->8->1 with 3x3x3 kernels and biases: (27+1)*4 + (4*27+1)*8 + (8*27+1)*1.
  EXPECT_EQ(j["parameters"], 1201);
  EXPECT_EQ(j["optimizer_state_bytes"].get<std::uint64_t>(),
            2u * 1201 * 4 + 6 * 8);  // adam moments + steps
  // Activations of a batch of 4 volumes of 16^3 dominate: at least the 13 channels of output
  // the layers produce (4 + 8 + 1), in float32.
  EXPECT_GT(j["step_peak_bytes"].get<std::uint64_t>(), 4u * 13 * 16 * 16 * 16 * 4);
  // train's predicted peak is its named parts: the process, the resting state (at least the
  // parameters and moments), a step, and the commitments of the mode auto picks for a small state.
  EXPECT_EQ(j["train_commit_mode"], "overlap");
  std::uint64_t sum = 0;
  for (const auto& part : j["train_peak_parts"]) sum += part["bytes"].get<std::uint64_t>();
  EXPECT_EQ(sum, j["train_peak_bytes"].get<std::uint64_t>());
  EXPECT_EQ(j["train_peak_parts"].size(), 4u);
  EXPECT_GT(j["process_bytes"].get<std::uint64_t>(), 50u << 20);  // LibTorch is loaded
  EXPECT_GE(j["resting_bytes"].get<std::uint64_t>(), 3u * 1201 * 4);
  // A replay's: the process, the resting state and the larger of a step and the (two, for a
  // state this small) states beside it between epochs; here the step's activations.
  sum = 0;
  for (const auto& part : j["replay_peak_parts"]) sum += part["bytes"].get<std::uint64_t>();
  EXPECT_EQ(sum, j["replay_peak_bytes"].get<std::uint64_t>());
  ASSERT_EQ(j["replay_peak_parts"].size(), 3u);
  EXPECT_EQ(j["replay_peak_parts"][2]["bytes"], j["step_peak_bytes"]);
  EXPECT_LT(j["replay_peak_bytes"].get<std::uint64_t>(),
            j["train_peak_bytes"].get<std::uint64_t>());
}

}  // namespace
}  // namespace vt

namespace vt {
namespace {

// Ctrl-C during train says what is committed and how to go on; a finished workdir trains
// nothing and says so.
TEST(CliTrain, AnInterruptSaysWhatIsCommittedAndARerunOfAFinishedWorkdirSaysNothingToDo) {
  testing::ScratchDir dir;
  const std::string task = (dir / "task.json").string();
  const std::string wd = (dir / "w").string();
  ASSERT_EQ(testing::run_command(
                testing::veritrain_binary() +
                    " task init --model mlp --epochs 2 --steps-per-epoch 400000 --trail-interval 0 "
                    "--batch-size 8 --out " +
                    task,
                dir.path())
                .exit_code,
            0);
  // SIGINT after 4 s: epoch 0 is committed by then, epoch 1 (400,000 steps) is not.
  auto r =
      testing::run_command("timeout --preserve-status -s INT 4 " + testing::veritrain_binary() +
                               " train --task " + task + " --workdir " + wd,
                           dir.path());
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("interrupted; epoch 0 of 2 is committed in " + wd +
                       "; run the same command to go on from there"),
            std::string::npos)
      << r.err;

  const std::string small = (dir / "small.json").string();
  const std::string done = (dir / "done").string();
  ASSERT_EQ(testing::run_command(testing::veritrain_binary() +
                                     " task init --model mlp --epochs 1 --steps-per-epoch 2 "
                                     "--batch-size 8 --out " +
                                     small,
                                 dir.path())
                .exit_code,
            0);
  const std::string train =
      testing::veritrain_binary() + " train --task " + small + " --workdir " + done;
  ASSERT_EQ(testing::run_command(train, dir.path()).exit_code, 0);
  auto again = testing::run_command(train, dir.path());
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("nothing to train: " + done +
                           " already holds every epoch of the task (1 epoch)"),
            std::string::npos)
      << again.out;
}

}  // namespace
}  // namespace vt

namespace vt {
namespace {

// An online verifier started before its provider says what it waits for, and for how long,
// instead of printing nothing until the evidence timeout; then it gives up with exit 3.
TEST(CliVerify, WaitingForAProviderThatDoesNotListenSaysSo) {
  testing::ScratchDir dir;
  const std::string task = (dir / "task.json").string();
  ASSERT_EQ(testing::run_command(testing::veritrain_binary() +
                                     " task init --model mlp --epochs 1 --steps-per-epoch 2 "
                                     "--batch-size 8 --out " +
                                     task,
                                 dir.path())
                .exit_code,
            0);
  const std::string token = (dir / "serve.token").string();
  ASSERT_TRUE(write_file_atomic(token, "secret\n").ok());
  std::filesystem::permissions(
      token, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto r =
      testing::run_command(testing::veritrain_binary() + " verify --task " + task +
                               " --online --provider 127.0.0.1:1 --insecure --token-file " + token +
                               " --evidence-timeout 3 --report " + (dir / "r").string(),
                           dir.path());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("nothing accepts connections at 127.0.0.1:1 yet; retrying"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace vt
