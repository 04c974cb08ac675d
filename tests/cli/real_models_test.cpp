// Real models in portable arithmetic (docs/portable.md, "Operators of real models"): resnet18,
// mobilenet_v2 and googlenet (its GoogLeNetOutputs read by the main logits) from Debian's
// torchvision, a TransformerEncoder classifier (2 layers, d 32, 4 heads, dropout 0.1), an LSTM
// classifier, a net of SELU, CELU, Mish, LogSigmoid, Hardshrink, Softshrink, Threshold, GLU (its
// sigmoid the portable kernel's) and PReLU from torch.nn, a module of constant padding, flips,
// rolls and shuffles, LR-ASPP segmentation, a video net, a net of decompositions, a VAE of
// randn_like, normal_, uniform_, randint, bernoulli and binary cross-entropy, nn.RNN's tanh and
// ReLU cells with a projected LSTM, an LSTM language model (on the bytes of Debian's fortunes),
// attention in torch.einsum, and torchaudio's conformer and wav2vec 2.0
// (tests/cli/real_models.py), each scripted by Debian's torch with its weights set from numpy
// (torch's own fill differs with the vector width), on sklearn's digits. `task init`
// picks portable for each; each trains to the same roots under every ATEN_CPU_CAPABILITY and
// thread count this CPU can pose as, a verifier under another setting accepts it, and a step's
// signed trace written under one setting is the replay's under another, call for call. A module
// with an operator that has no portable kernel is refused by name and line.

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "tests/cli/python_made.h"
#include "tests/cli/reference_util.h"
#include "tests/test_util.h"

namespace vt {
namespace {

namespace fs = std::filesystem;
using reference::committed_roots;
using reference::Setting;
using testing::run_command;
using testing::veritrain_binary;

std::vector<reference::Setting> settings() { return reference::settings({1, 2}); }

class RealModels : public ::testing::TestWithParam<const char*> {
 protected:
  // The models and data of tests/cli/real_models.py, made once (python_made.h) and copied into
  // this process's folder, where the tests write their tasks and workdirs beside them.
  static void SetUpTestSuite() {
    dir_ = testing::copy_of_made("real_models.py", {"make_digits.py", "requestor_nets.py"},
                                 "torch, torchvision, torchaudio, sklearn", made_);
  }
  static void TearDownTestSuite() { dir_.reset(); }
  void SetUp() override {
    ASSERT_EQ(made_, "");
    if (dir_ == nullptr)
      GTEST_SKIP() << "python3-torch, -torchvision, -torchaudio or -sklearn not installed";
  }
  static std::string in() { return "cd '" + dir_->path().string() + "' && "; }
  // The task's dataset: the fortunes' bytes for the language model, else a safetensors file.
  static std::string dataset_of(const std::string& model) {
    if (model == "lstm_lm")
      return "--dataset tokens --context 16 --token-dtype u16 --data-file fortunes.bin";
    return "--dataset tensors --data-file " + data_of(model) + ".safetensors --eval-fraction 0.25";
  }
  static std::string data_of(const std::string& model) {
    const bool images = model == "resnet18" || model == "mobilenet_v2" || model == "googlenet" ||
                        model == "shuffler" || model == "decomposed";
    if (model == "lraspp") return "segments";
    if (model == "clip_net") return "clips";
    if (model == "wav2vec2") return "waves";
    return images ? "images" : "rows";
  }

  static std::unique_ptr<testing::ScratchDir> dir_;
  static std::string made_;
};
std::unique_ptr<testing::ScratchDir> RealModels::dir_;
std::string RealModels::made_;

TEST_P(RealModels, TrainPortablyToTheSameRootsOnEverySettingAndVerifyOnAnother) {
  const std::string model = GetParam();
  const std::string task = model + ".json";
  // task init chooses portable by itself, and says so.
  auto init = run_command(
      in() + veritrain_binary() + " task init --model torchscript --model-file " + model + ".pt " +
          dataset_of(model) + " --epochs 1 --steps-per-epoch 2 --batch-size 4" +
          (model == "decomposed" || model == "vae" ? " --loss model" : "") + " --out " + task,
      dir_->path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  EXPECT_EQ(nlohmann::json::parse(*read_text_file(dir_->path() / task))["determinism"], "portable")
      << init.err;
  const std::vector<Setting> all = settings();
  std::vector<std::string> reference;
  for (const Setting& s : all) {
    const std::string wd = "w-" + model + "-" + s.name();
    std::string train = in() + s.env() + veritrain_binary();
    train.append(" train --task ").append(task).append(" --workdir ").append(wd);
    auto r =
        run_command(train.append(" --threads ").append(std::to_string(s.threads)), dir_->path());
    ASSERT_EQ(r.exit_code, 0) << s.name() << ": " << r.err;
    const auto roots = committed_roots(dir_->path() / wd / "commitments.log");
    ASSERT_EQ(roots.size(), 2u) << s.name();
    if (reference.empty()) reference = roots;
    EXPECT_EQ(roots, reference) << s.name() << " against " << all.front().name();
  }
  const Setting& first = all.front();
  const Setting& last = all.back();
  auto v = run_command(in() + last.env() + veritrain_binary() + " verify --task " + task +
                           " --workdir w-" + model + "-" + first.name() +
                           " --check-probability 1 --jobs 1 --report r-" + model,
                       dir_->path());
  EXPECT_EQ(v.exit_code, 0) << first.name() << " verified at " << last.name() << ":\n"
                            << v.out << v.err;

  // A dispute below the step (docs/dispute.md): the provider's signed trace of a step, written
  // under one setting, is the auditor's replay under another, call for call; the pools, norms,
  // batched products and recurrent layers of these models are recorded operators.
  const std::string wd = "w-" + model + "-" + first.name();
  auto traced =
      run_command(in() + first.env() + veritrain_binary() + " trace --task " + task +
                      " --workdir " + wd + " --epoch 1 --step 2 --out trace-" + model + ".json",
                  dir_->path());
  ASSERT_EQ(traced.exit_code, 0) << traced.err;
  const auto trace =
      nlohmann::json::parse(*read_text_file(dir_->path() / ("trace-" + model + ".json")));
  std::set<std::string> ops;
  for (const auto& call : trace["calls"]) ops.insert(call["op"].get<std::string>());
  // (An adaptive average pool to 1 × 1 runs as a row mean.)
  const std::map<std::string, std::vector<std::string>> expected = {
      {"resnet18", {"max_pool2d", "max_pool2d_backward", "row_mean", "conv", "batch_norm_train"}},
      {"googlenet", {"max_pool2d", "max_pool2d_backward", "conv", "batch_norm_train", "dropout"}},
      {"mobilenet_v2",
       {"hardtanh", "hardtanh_backward", "row_mean", "conv", "batch_norm_backward"}},
      {"encoder", {"layer_norm", "softmax", "dropout", "gemm", "baddbmm", "baddbmm_backward"}},
      {"lstm", {"rnn", "rnn_backward", "gemm", "cross_entropy"}},
      {"shuffler", {"conv", "conv_backward", "row_mean", "gemm"}},
      {"clip_net", {"conv", "conv_backward", "batch_norm_train", "row_mean"}},
      {"lraspp",
       {"upsample_bilinear2d", "upsample_bilinear2d_backward", "conv", "conv_backward", "hardswish",
        "hardsigmoid"}},
      {"selu_net", {"selu",       "selu_backward",       "celu",        "celu_backward",
                    "mish",       "mish_backward",       "log_sigmoid", "log_sigmoid_backward",
                    "hardshrink", "hardshrink_backward", "softshrink",  "softshrink_backward",
                    "threshold",  "threshold_backward",  "sigmoid",     "sigmoid_backward",
                    "exp",        "exp_backward",        "log",         "log_backward"}},
      {"decomposed",
       {"group_norm", "group_norm_backward", "max_pool2d", "max_pool2d_backward", "rnn",
        "rnn_backward", "dropout", "embedding", "embedding_backward", "log", "reduce",
        "reduce_backward", "uniform", "bernoulli", "exp"}},
      {"vae",
       {"normal", "uniform", "bernoulli_of", "randint", "exp", "exp_backward", "log", "sigmoid",
        "gemm"}},
      {"elman", {"rnn", "rnn_backward", "dropout", "gemm", "cross_entropy"}},
      {"lstm_lm",
       {"embedding", "embedding_backward", "rnn", "rnn_backward", "dropout", "gemm",
        "cross_entropy"}},
      {"einsum", {"gemm", "softmax", "softmax_backward", "reduce", "reduce_backward"}},
      {"conformer",
       {"batch_norm_train", "conv", "conv_backward", "silu", "sigmoid", "softmax", "baddbmm",
        "layer_norm", "dropout"}},
      {"wav2vec2",
       {"group_norm", "group_norm_backward", "gelu", "gelu_backward", "conv", "conv_backward",
        "uniform", "layer_norm", "softmax", "baddbmm", "dropout"}}};
  for (const std::string& op : expected.at(model))
    EXPECT_TRUE(ops.contains(op)) << op << " not in " << ::testing::PrintToString(ops);
  auto agrees =
      run_command(in() + last.env() + veritrain_binary() + " --json dispute --task " + task +
                      " --workdir " + wd + " --provider-trace trace-" + model + ".json",
                  dir_->path());
  EXPECT_EQ(agrees.exit_code, 0) << agrees.out << agrees.err;
  EXPECT_NE(agrees.out.find("\"result\":\"agrees\""), std::string::npos) << agrees.out;
}

INSTANTIATE_TEST_SUITE_P(TorchvisionAndTorchNn, RealModels,
                         ::testing::Values("resnet18", "mobilenet_v2", "googlenet", "encoder",
                                           "lstm", "selu_net", "shuffler", "lraspp", "clip_net",
                                           "decomposed", "vae", "elman", "lstm_lm", "einsum",
                                           "conformer", "wav2vec2"),
                         testing::ValueName());

// An operator without a portable kernel: task init --determinism portable refuses it by name and
// by the line of the module's code; unasked, task init picks exact and says which operator.
TEST_F(RealModels, AnOperatorWithoutAKernelIsRefusedByNameAndLine) {
  auto refused = run_command(in() + veritrain_binary() +
                                 " task init --determinism portable --model torchscript "
                                 "--model-file pooled.pt --out pooled.json",
                             dir_->path());
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("aten::lgamma"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("real_models.py:"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("`return self.fc(torch.lgamma(x))`"), std::string::npos)
      << refused.err;
  EXPECT_FALSE(fs::exists(dir_->path() / "pooled.json"));
  auto fallback = run_command(in() + veritrain_binary() +
                                  " task init --model torchscript --model-file pooled.pt --out "
                                  "pooled.json",
                              dir_->path());
  ASSERT_EQ(fallback.exit_code, 0) << fallback.err;
  EXPECT_NE(fallback.err.find("task init: determinism exact, not portable: "), std::string::npos)
      << fallback.err;
  EXPECT_NE(fallback.err.find("aten::lgamma"), std::string::npos) << fallback.err;
  // Short lines that say it once: what it means, and what to do.
  std::istringstream lines(fallback.err);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("aten::lgamma") == std::string::npos) {
      EXPECT_LE(line.size(), 100u) << line;
    }
  }
  const std::size_t pin = fallback.err.find("--pin-environment");
  ASSERT_NE(pin, std::string::npos) << fallback.err;
  EXPECT_EQ(fallback.err.find("--pin-environment", pin + 1), std::string::npos) << fallback.err;
  EXPECT_EQ(fallback.err.find("warning:"), std::string::npos) << fallback.err;
  EXPECT_EQ(nlohmann::json::parse(*read_text_file(dir_->path() / "pooled.json"))["determinism"],
            "exact");

  // An operator portable at some arguments only says which.
  auto powed = run_command(in() + veritrain_binary() +
                               " task init --determinism portable --model torchscript "
                               "--model-file powed.pt --out powed.json",
                           dir_->path());
  EXPECT_EQ(powed.exit_code, 2);
  EXPECT_NE(powed.err.find("aten::pow.Tensor_Tensor"), std::string::npos) << powed.err;
  EXPECT_NE(powed.err.find("with a tensor exponent"), std::string::npos) << powed.err;
  EXPECT_NE(powed.err.find("torch.pow(x.abs(), x)"), std::string::npos) << powed.err;
}

// What forward returns (docs/models.md): torchvision's googlenet returns GoogLeNetOutputs in
// training mode and trains on its main logits; a module returning a dict trains on its "out"
// (torchvision's LR-ASPP segmentation model, on per-pixel targets, is among the models above).
// Each trains and verifies in the arithmetic task init picks for it.
TEST_F(RealModels, TupleAndDictOutputsTrainAndVerify) {
  const std::map<std::string, std::string> data = {{"googlenet", "images"}, {"dict_out", "rows"}};
  for (const auto& [model, rows] : data) {
    const std::string task = model + ".json", wd = "w-" + model;
    std::string command = in() + veritrain_binary();
    command.append(" task init --model torchscript --model-file ").append(model);
    command.append(".pt --dataset tensors --data-file ").append(rows);
    command.append(".safetensors --epochs 1 --steps-per-epoch 2 --batch-size 4 --out ")
        .append(task);
    auto init = run_command(command, dir_->path());
    ASSERT_EQ(init.exit_code, 0) << model << ": " << init.err;
    std::string train = in() + veritrain_binary();
    train.append(" train --task ").append(task).append(" --workdir ").append(wd);
    auto t = run_command(train, dir_->path());
    ASSERT_EQ(t.exit_code, 0) << model << ": " << t.err;
    std::string verify = in() + veritrain_binary();
    verify.append(" verify --task ").append(task).append(" --workdir ").append(wd);
    verify.append(" --check-probability 1 --report r-").append(model);
    auto v = run_command(verify, dir_->path());
    EXPECT_EQ(v.exit_code, 0) << model << ": " << v.out << v.err;
  }
}

// Per-position targets (docs/models.md): a fully convolutional module's {"out": [B, C, H, W]}
// against [B, H, W] class ids trains portably to the same roots on every setting, with held-out
// per-pixel accuracy, and verifies under another setting.
TEST_F(RealModels, PerPositionTargetsTrainPortablyEverywhere) {
  auto init = run_command(in() + veritrain_binary() +
                              " task init --model torchscript --model-file segmenter.pt "
                              "--dataset tensors --data-file segments.safetensors "
                              "--eval-fraction 0.25 --epochs 1 --steps-per-epoch 3 "
                              "--batch-size 4 --out segmenter.json",
                          dir_->path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  EXPECT_EQ(nlohmann::json::parse(*read_text_file(dir_->path() / "segmenter.json"))["determinism"],
            "portable")
      << init.err;
  const std::vector<Setting> all = settings();
  std::vector<std::string> reference;
  for (const Setting& s : all) {
    const std::string wd = "w-segmenter-" + s.name();
    auto r = run_command(in() + s.env() + veritrain_binary() +
                             " --json train --task segmenter.json"
                             " --workdir " +
                             wd + " --threads " + std::to_string(s.threads),
                         dir_->path());
    ASSERT_EQ(r.exit_code, 0) << s.name() << ": " << r.err;
    // The held-out split's per-pixel accuracy, a number.
    EXPECT_NE(r.out.find("\"accuracy\":"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\"accuracy\":null"), std::string::npos) << r.out;
    const auto roots = committed_roots(dir_->path() / wd / "commitments.log");
    if (reference.empty()) reference = roots;
    EXPECT_EQ(roots, reference) << s.name();
  }
  auto v = run_command(in() + all.back().env() + veritrain_binary() +
                           " verify --task segmenter.json --workdir w-segmenter-" +
                           all.front().name() + " --check-probability 1 --report r-segmenter",
                       dir_->path());
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

}  // namespace
}  // namespace vt
