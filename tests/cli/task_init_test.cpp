// `task init` writes a valid task for every model x optimizer x dataset it accepts, its flags
// reach the task, and `task show` lists every field.
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "protocol/task.h"
#include "tests/cli/model_fixtures.h"
#include "tests/test_util.h"

namespace vt {
namespace {

using testing::run_command;
using testing::veritrain_binary;

// Which datasets each model is built for (training/zoo.cpp); every other pair must be refused.
bool fits(const std::string& model, const std::string& dataset) {
  if (dataset == "synthetic" || model == "torchscript") return true;
  return (dataset == "mnist" && model == "mlp") || (dataset == "cifar10" && model == "cnn");
}

// One model per test (ctest runs each in its own process, in parallel where it can): every
// dataset x optimizer for that model.
class TaskInitCombinations : public ::testing::TestWithParam<std::string> {};

TEST_P(TaskInitCombinations, EveryOptimizerAndDatasetIsValidOrRefusedByFit) {
  const std::string model = GetParam();
  const auto fx = testing::model_fixtures();
  if (fx.empty())
    GTEST_SKIP() << "python3-torch / python3-sklearn not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  const std::map<std::string, std::string> data_dirs = {{"mnist", (fx / "mnist").string()},
                                                        {"cifar10", (fx / "cifar").string()}};
  int accepted = 0, fitting = 0;
  {
    for (const std::string dataset : {"synthetic", "mnist", "cifar10"}) {
      for (const std::string optimizer : {"", "sgd", "adam", "adamw"}) {
        // A pair that does not fit is refused whatever the optimizer: once is enough.
        if (!fits(model, dataset) && !optimizer.empty()) continue;
        std::string cmd =
            veritrain_binary() + " task init --model " + model + " --dataset " + dataset;
        if (!optimizer.empty()) cmd += " --optimizer " + optimizer;
        if (data_dirs.count(dataset)) cmd += " --data-dir " + data_dirs.at(dataset);
        if (model == "torchscript")
          cmd += " --model-file " + (fx / ("ts_" + dataset + ".pt")).string();
        const std::string what =
            model + " x " + dataset + " x " + (optimizer.empty() ? "default" : optimizer);
        auto r = run_command(cmd, dir.path());
        if (!fits(model, dataset)) {
          EXPECT_EQ(r.exit_code, 2) << what;
          EXPECT_NE(r.err.find("dataset.name: " + dataset), std::string::npos)
              << what << ": " << r.err;
          continue;
        }
        ASSERT_EQ(r.exit_code, 0) << what << ": " << r.err;
        // task init validated what it wrote; reading it back validates it the way train will.
        ASSERT_TRUE(write_file_atomic(dir / "t.json", r.out).ok());
        auto task = load_task((dir / "t.json").string());
        ASSERT_TRUE(task.ok()) << what << ": " << task.error().message;
        if (!optimizer.empty()) {
          EXPECT_EQ(task->optimizer.name, optimizer) << what;
        }
        ++accepted;
      }
    }
  }
  for (const std::string dataset : {"synthetic", "mnist", "cifar10"})
    fitting += fits(model, dataset);
  EXPECT_EQ(accepted, 4 * fitting);
}

INSTANTIATE_TEST_SUITE_P(Zoo, TaskInitCombinations,
                         ::testing::Values("mlp", "cnn", "conv3d", "gpt", "torchscript"),
                         testing::ValueName());

TEST(TaskInit, OneStepOfTrainingWithEachOptimizer) {
  testing::ScratchDir dir;
  for (const std::string optimizer : {"sgd", "adam", "adamw"}) {
    const auto task = (dir / (optimizer + ".json")).string();
    auto init = run_command(veritrain_binary() + " task init --model mlp --optimizer " + optimizer +
                                " --epochs 1 --steps-per-epoch 1 --out " + task,
                            dir.path());
    ASSERT_EQ(init.exit_code, 0) << optimizer << ": " << init.err;
    auto train = run_command(veritrain_binary() + " --json train --task " + task + " --workdir " +
                                 (dir / ("w-" + optimizer)).string(),
                             dir.path());
    ASSERT_EQ(train.exit_code, 0) << optimizer << ": " << train.err;
    EXPECT_NE(train.out.find("\"epochs_committed\":2"), std::string::npos) << train.out;
  }
}

// task init says which arithmetic it picked when nobody asked, once and in short lines; a model
// smaller than the default k is sampled whole, so the task it writes passes task check.
TEST(TaskInit, SaysWhenItPicksPortableAndWritesATaskThatChecks) {
  testing::ScratchDir dir;
  const auto out = (dir / "t.json").string();
  auto init = run_command(veritrain_binary() +
                              " task init --model mlp --option hidden=4 "
                              "--option input_dim=8 --out " +
                              out,
                          dir.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  EXPECT_NE(init.err.find("task init: determinism portable: "), std::string::npos) << init.err;
  auto check = run_command(veritrain_binary() + " task check " + out, dir.path());
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(check.out.find("determinism portable: veritrain's own"), std::string::npos)
      << check.out;  // said once, by task init
  auto asked =
      run_command(veritrain_binary() + " task init --determinism portable --model mlp --out " + out,
                  dir.path());
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_EQ(asked.err.find("determinism portable: "), std::string::npos) << asked.err;
}

TEST(TaskInit, OptimizerFlagsReachTheTaskAndMisplacedOnesAreRefused) {
  testing::ScratchDir dir;
  const auto out = (dir / "t.json").string();
  auto sgd = run_command(veritrain_binary() +
                             " task init --model cnn --optimizer sgd --momentum 0.5 --nesterov"
                             " --weight-decay 0.001 --out " +
                             out,
                         dir.path());
  ASSERT_EQ(sgd.exit_code, 0) << sgd.err;
  auto shown = run_command(veritrain_binary() + " task show " + out, dir.path());
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  for (const char* line :
       {"optimizer.momentum", "optimizer.nesterov", "optimizer.weight_decay", "optimizer.beta2",
        "schedule.warmup_steps", "fingerprint.tracking_k", "tolerance.rel_l2",
        "dataset.options.samples", "model.options.width", "loss", "seed", "precision"}) {
    EXPECT_NE(shown.out.find(std::string("\n") + line + " "), std::string::npos) << line << "\n"
                                                                                 << shown.out;
  }
  EXPECT_NE(shown.out.find("0.5\n"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("true\n"), std::string::npos) << shown.out;

  auto adam =
      run_command(veritrain_binary() +
                      " --json task init --model gpt --optimizer adam --beta1 0.8 --beta2 0.99"
                      " --eps 1e-6 --lr 1e-4",
                  dir.path());
  ASSERT_EQ(adam.exit_code, 0) << adam.err;
  auto t = nlohmann::json::parse(adam.out)["task"];  // --json: {"ok", "kind", "task_id", "task"}
  EXPECT_EQ(t["optimizer"]["beta1"], 0.8);
  EXPECT_EQ(t["optimizer"]["beta2"], 0.99);
  EXPECT_EQ(t["optimizer"]["eps"], 1e-6);
  EXPECT_EQ(t["optimizer"]["momentum"], 0.0);
  EXPECT_LE(t["schedule"]["min_lr"].get<double>(), 1e-4);  // never above a lowered lr

  auto wrong = run_command(
      veritrain_binary() + " task init --model mlp --optimizer adam --momentum 0.9", dir.path());
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.err.find("optimizer.momentum: only applies to sgd"), std::string::npos)
      << wrong.err;
  auto nesterov = run_command(veritrain_binary() + " task init --model mlp --momentum 0 --nesterov",
                              dir.path());
  EXPECT_EQ(nesterov.exit_code, 2);
  EXPECT_NE(nesterov.err.find("optimizer.nesterov: requires optimizer.momentum > 0"),
            std::string::npos)
      << nesterov.err;
}

}  // namespace
}  // namespace vt
