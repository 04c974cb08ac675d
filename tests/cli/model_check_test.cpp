// User TorchScript modules that cannot be trained or replayed are found before anything is
// committed: a wrong shape or class count, a mutable attribute, hidden state (`task check`).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/model_fixtures.h"

namespace vt {
namespace {

using testing::run_command;
using testing::veritrain_binary;
namespace fs = std::filesystem;

class ModelCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    fx_ = testing::model_fixtures();
    if (fx_.empty())
      GTEST_SKIP() << "python3-torch / python3-sklearn not installed (scripts/setup.sh)";
  }

  // A valid torchscript task whose module is then swapped for `module` (pinned by digest), as
  // a requestor editing task.json by hand would: init itself refuses a broken module. Exact
  // mode, where LibTorch's kernels say what went wrong (portable mode's say it in their words).
  std::string task_with(const std::string& module, const std::string& extra = "") {
    std::string task = (dir_ / "task.json").string();
    auto init = run_command(
        veritrain_binary() + " task init --determinism exact --model torchscript --model-file " +
            (fx_ / "ts_synthetic.pt").string() + " --epochs 2 --steps-per-epoch 3 --batch-size 8 " +
            extra + " --out " + task,
        dir_.path());
    EXPECT_EQ(init.exit_code, 0) << init.err;
    auto j = nlohmann::json::parse(*read_text_file(task));
    j["model"]["path"] = (fx_ / module).string();
    j["model"]["sha256"] = hex_encode(sha256(*read_file(fx_ / module)));
    EXPECT_TRUE(write_file_atomic(task, j.dump(2)).ok());
    return task;
  }

  fs::path fx_;
  testing::ScratchDir dir_;
};

TEST_F(ModelCheck, WrongInputShapeIsTheModelsMessageWithExit2AndNothingCommitted) {
  auto init = run_command(veritrain_binary() + " task init --model torchscript --model-file " +
                              (fx_ / "wrong_shape.pt").string(),
                          dir_.path());
  EXPECT_EQ(init.exit_code, 2) << init.err;
  EXPECT_NE(init.err.find("mat1 and mat2 shapes cannot be multiplied"), std::string::npos)
      << init.err;
  EXPECT_NE(init.err.find("inputs [32, 32] Float"), std::string::npos) << init.err;
  EXPECT_EQ(init.err.find("Traceback"), std::string::npos) << init.err;

  const std::string task = task_with("wrong_shape.pt");
  const fs::path work = dir_ / "w";
  auto train = run_command(
      veritrain_binary() + " train --task " + task + " --workdir " + work.string(), dir_.path());
  EXPECT_EQ(train.exit_code, 2) << train.err;
  EXPECT_NE(train.err.find("mat1 and mat2 shapes cannot be multiplied"), std::string::npos)
      << train.err;
  EXPECT_EQ(train.err.find("Traceback"), std::string::npos) << train.err;
  std::error_code ec;
  EXPECT_TRUE(!fs::exists(work / "commitments.log") ||
              fs::file_size(work / "commitments.log", ec) == 0)
      << "epoch 0 was committed for a task that cannot run";

  auto check = run_command(veritrain_binary() + " task check " + task, dir_.path());
  EXPECT_EQ(check.exit_code, 2) << check.err;
  EXPECT_NE(check.err.find("mat1 and mat2 shapes cannot be multiplied"), std::string::npos)
      << check.err;
}

TEST_F(ModelCheck, AFailingBackwardPassIsTheModelsMessageWithExit2) {
  // Fingerprints within the module's 264 values: otherwise `train` stops at fingerprint.k first.
  const std::string task = task_with("inplace_backward.pt", "--k 64 --tracking-k 64");
  auto train = run_command(
      veritrain_binary() + " train --task " + task + " --workdir " + (dir_ / "w").string(),
      dir_.path());
  EXPECT_EQ(train.exit_code, 2) << train.err;
  EXPECT_NE(train.err.find("training: the model failed: one of the variables needed for gradient "
                           "computation has been modified by an inplace operation"),
            std::string::npos)
      << train.err;
}

TEST_F(ModelCheck, TooFewClassesNamesExpectedAndGot) {
  auto init =
      run_command(veritrain_binary() +
                      " task init --model torchscript --batch-size 8 --data-option classes=6"
                      " --model-file " +
                      (fx_ / "ts_synthetic.pt").string(),
                  dir_.path());
  EXPECT_EQ(init.exit_code, 2) << init.err;
  EXPECT_NE(
      init.err.find(
          "returned [8, 4] Float: 4 classes, but the targets hold class 5; expected [8, C] logits "
          "with C > 5"),
      std::string::npos)
      << init.err;
}

TEST_F(ModelCheck, MutableAttributeIsRefusedByName) {
  auto init = run_command(veritrain_binary() + " task init --model torchscript --model-file " +
                              (fx_ / "counter.pt").string(),
                          dir_.path());
  EXPECT_EQ(init.exit_code, 2) << init.err;
  EXPECT_NE(init.err.find("attribute \"calls\" (int) is changed by forward()"), std::string::npos)
      << init.err;
  auto check =
      run_command(veritrain_binary() + " task check " + task_with("counter.pt"), dir_.path());
  EXPECT_EQ(check.exit_code, 2) << check.err;
  EXPECT_NE(check.err.find("attribute \"calls\""), std::string::npos) << check.err;
}

TEST_F(ModelCheck, TaskCheckPassesAReplayableModelQuickly) {
  const std::string task = task_with("ts_synthetic.pt");
  auto check = run_command(veritrain_binary() + " --json task check " + task, dir_.path());
  ASSERT_EQ(check.exit_code, 0) << check.err;
  auto j = nlohmann::json::parse(check.out);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["steps"], 3);
  // A pre-flight should take well under 10 s on a small task; this machine is shared, hence the
  // margin.
  EXPECT_LT(j["seconds"].get<double>(), 20.0);
  std::cerr << "task check took " << j["seconds"].get<double>() << " s\n";
}

TEST_F(ModelCheck, TaskCheckFindsStateOutsideTheSnapshot) {
  auto check =
      run_command(veritrain_binary() + " task check " + task_with("hidden_state.pt"), dir_.path());
  EXPECT_EQ(check.exit_code, 1) << check.err;
  EXPECT_NE(check.err.find("not reproducible: 3 steps replayed from a snapshot"), std::string::npos)
      << check.err;
  EXPECT_NE(check.err.find("param/fc.weight"), std::string::npos) << check.err;
  EXPECT_NE(check.err.find("register_buffer"), std::string::npos) << check.err;
}

}  // namespace
}  // namespace vt
