// `task init` writes a valid task for every model x optimizer x dataset it accepts, its flags
// reach the task, and `task show` lists every field.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/task.h"
#include "tests/cli/model_fixtures.h"
#include "tests/test_util.h"

namespace vt {
namespace {

using testing::run_command;
using testing::veritrain_binary;

// Which datasets each model is built for (training/zoo/zoo.cpp); every other pair must be refused.
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
        std::string cmd = veritrain_binary();
        cmd += " task init --model " + model;
        cmd += " --dataset " + dataset;
        if (!optimizer.empty()) cmd += " --optimizer " + optimizer;
        if (data_dirs.count(dataset)) cmd += " --data-dir " + data_dirs.at(dataset);
        if (model == "torchscript")
          cmd += " --model-file " + (fx / ("ts_" + dataset + ".pt")).string();
        std::string what = model;
        what += " x " + dataset;
        what += " x " + (optimizer.empty() ? std::string("default") : optimizer);
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
    std::string command = veritrain_binary();
    command += " task init --model mlp --optimizer " + optimizer;
    command += " --epochs 1 --steps-per-epoch 1 --out " + task;
    auto init = run_command(command, dir.path());
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

// The light `veritrain` writes a zoo model's task on synthetic data without LibTorch, counting
// the tensors a fingerprint must cover instead of building the model (cli/task_init.h): it must
// write, say and refuse exactly what veritrain-torch does, across models and optimizers whose
// state sizes k (a deep gpt's 1,098 tensors, a one-unit mlp smaller than the default k), and
// errors that only the build-free checks can catch.
TEST(TaskInit, TheLightCommandWritesWhatVeritrainTorchWrites) {
  testing::ScratchDir dir;
  const std::string light = veritrain_binary();
  const std::string torch =
      (std::filesystem::path(light).parent_path() / "veritrain-torch").string();
  const std::vector<std::string> lines = {
      "--model mlp --epochs 4 --steps-per-epoch 3 --batch-size 8 --data-option samples=64",
      "--model cnn --option blocks=3 --option width=4 --optimizer adam",
      "--model conv3d --json",
      "--model gpt --option layers=30",
      "--model gpt --option layers=30 --optimizer sgd --momentum 0",
      "--model mlp --option layers=0 --option hidden=1 --option input_dim=1",
      "--model mlp --option hidden=2 --option layers=1 --option input_dim=2 --optimizer adamw",
      "--model gpt --option layers=30 --k 300",
      "--model mlp --determinism exact --threads 3 --precision bf16",
      "--model cnn --determinism tolerance --device cuda",
      "--model mlp --option hidden=65536 --option layers=64",
      "--model gpt --option d_model=30",
      "--model gtp",
  };
  // VERITRAIN_TORCH names nothing: a light command that handed over would fail with exit 3.
  const std::string light_init =
      "VERITRAIN_TORCH=" + (dir / "none").string() + " " + light + " task init ";
  const std::string torch_init = torch + " task init ";
  int refused = 0;
  for (const std::string& line : lines) {
    const auto a = run_command(light_init + line, dir.path());
    const auto b = run_command(torch_init + line, dir.path());
    EXPECT_EQ(a.exit_code, b.exit_code) << line << "\n" << a.err;
    EXPECT_EQ(a.out, b.out) << line;
    EXPECT_EQ(a.err, b.err) << line;
    refused += b.exit_code == 2;
  }
  EXPECT_EQ(refused, 4);  // --k 300, an mlp no machine holds, d_model 30, gtp
}

// What the light command cannot count it hands over: a TorchScript module, data files, a pinned
// environment, each a command veritrain-torch runs (here: named by VERITRAIN_TORCH, absent).
TEST(TaskInit, TheLightCommandHandsOverWhatNeedsTheModelBuilt) {
  testing::ScratchDir dir;
  const std::string init =
      "VERITRAIN_TORCH=" + (dir / "none").string() + " " + veritrain_binary() + " task init ";
  for (const std::string line :
       {"--model torchscript --model-file m.pt", "--model mlp --dataset mnist --data-dir d",
        "--model mlp --determinism exact --pin-environment"}) {
    const auto r = run_command(init + line, dir.path());
    EXPECT_EQ(r.exit_code, 3) << line << ": " << r.err;
    EXPECT_NE(r.err.find("this command needs LibTorch"), std::string::npos)
        << line << ": " << r.err;
  }
}

// The recipe flags reach the task; --no-decay resolves its rule against the model's own
// parameters, so the task commits names rather than a rule a later build could read otherwise;
// augmentation is written for images and refused, naming the field, for anything else.
TEST(TaskInit, RecipeFlagsReachTheTaskAndNoDecayNamesTheModelsParameters) {
  testing::ScratchDir dir;
  const std::string cnn = veritrain_binary() +
                          " --json task init --model cnn --option width=4 --option blocks=1 "
                          "--weight-decay 0.05 --clip-grad-norm 1 --clip-norm inf "
                          "--label-smoothing 0.1 --no-decay ";
  auto norm_and_bias = run_command(cnn + "norm_and_bias", dir.path());
  ASSERT_EQ(norm_and_bias.exit_code, 0) << norm_and_bias.err;
  auto t = nlohmann::json::parse(norm_and_bias.out)["task"];
  EXPECT_EQ(t["optimizer"]["clip_grad_norm"], 1.0);
  EXPECT_EQ(t["optimizer"]["clip_norm"], "inf");
  EXPECT_EQ(t["loss_options"]["label_smoothing"], 0.1);
  const auto spared = t["optimizer"]["no_decay"].get<std::vector<std::string>>();
  EXPECT_TRUE(std::is_sorted(spared.begin(), spared.end()));
  // Every BatchNorm's weight and bias, the head's bias; no convolution weight (they have no bias).
  EXPECT_NE(std::find(spared.begin(), spared.end(), "stem_bn.weight"), spared.end());
  EXPECT_NE(std::find(spared.begin(), spared.end(), "stages.0.bn1.bias"), spared.end());
  EXPECT_NE(std::find(spared.begin(), spared.end(), "head.bias"), spared.end());
  for (const std::string& name : spared) EXPECT_EQ(name.find("conv"), std::string::npos) << name;
  // 1d picks the same parameters here: every norm weight and bias is 1-d, and so is head.bias.
  auto one_d = run_command(cnn + "1d", dir.path());
  ASSERT_EQ(one_d.exit_code, 0) << one_d.err;
  EXPECT_EQ(nlohmann::json::parse(one_d.out)["task"]["optimizer"]["no_decay"], spared);
  auto patterns = run_command(cnn + "'head.*,stem_bn.bias'", dir.path());
  ASSERT_EQ(patterns.exit_code, 0) << patterns.err;
  EXPECT_EQ(nlohmann::json::parse(patterns.out)["task"]["optimizer"]["no_decay"],
            (std::vector<std::string>{"head.bias", "head.weight", "stem_bn.bias"}));

  auto unmatched = run_command(cnn + "'fc.*'", dir.path());
  EXPECT_EQ(unmatched.exit_code, 2);
  EXPECT_NE(unmatched.err.find(
                "--no-decay: pattern \"fc.*\" matches no parameter of the model (its parameters: "
                "stem.weight, stem_bn.weight"),
            std::string::npos)
      << unmatched.err;
  auto no_weight_decay =
      run_command(veritrain_binary() + " task init --model mlp --no-decay 1d", dir.path());
  EXPECT_EQ(no_weight_decay.exit_code, 2);
  EXPECT_NE(
      no_weight_decay.err.find("optimizer.no_decay: only applies with optimizer.weight_decay > 0"),
      std::string::npos)
      << no_weight_decay.err;
  auto augment = run_command(veritrain_binary() +
                                 " --json task init --model cnn --crop-padding 4 --padding-mode "
                                 "reflect --flip",
                             dir.path());
  ASSERT_EQ(augment.exit_code, 0) << augment.err;
  EXPECT_EQ(nlohmann::json::parse(augment.out)["task"]["dataset"]["augment"],
            nlohmann::json::parse(R"({"crop_padding":4,"flip":true,"padding_mode":"reflect"})"));
  auto flat = run_command(veritrain_binary() + " task init --model mlp --flip", dir.path());
  EXPECT_EQ(flat.exit_code, 2);
  EXPECT_NE(flat.err.find("dataset.augment: applies to images of shape [C, H, W]; this task's "
                          "examples are [32]"),
            std::string::npos)
      << flat.err;
  auto smoothing_mse = run_command(
      veritrain_binary() + " task init --model mlp --loss mse --label-smoothing 0.1", dir.path());
  EXPECT_EQ(smoothing_mse.exit_code, 2);
  EXPECT_NE(smoothing_mse.err.find("loss_options.label_smoothing: only applies to loss "
                                   "cross_entropy"),
            std::string::npos)
      << smoothing_mse.err;
}

}  // namespace
}  // namespace vt
