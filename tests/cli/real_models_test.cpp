// Real models in portable arithmetic (docs/portable.md, "Operators of real models"): resnet18 and
// mobilenet_v2 from Debian's torchvision, a TransformerEncoder classifier (2 layers, d 32, 4 heads,
// dropout 0.1) and an LSTM classifier from torch.nn, each scripted by Debian's torch with its
// weights set from numpy (torch's own fill differs with the vector width), on sklearn's digits.
// `task init` picks portable for each; each trains to the same roots under every
// ATEN_CPU_CAPABILITY and thread count this CPU can pose as, and a verifier under another
// setting accepts it, and a step's signed trace written under one setting is the replay's under
// another, call for call. A module with an operator that has no portable kernel is refused by
// name and line.

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "tests/cli/reference_util.h"
#include "tests/test_util.h"

namespace vt {
namespace {

namespace fs = std::filesystem;
using reference::committed_roots;
using reference::kPython;
using reference::Setting;
using testing::run_command;
using testing::veritrain_binary;

constexpr const char* kModels = R"PY(
import sys
sys.path.insert(0, sys.argv[2])
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
import torchvision.models as tvm
from sklearn.datasets import load_digits
from make_digits import safetensors_bytes
out = sys.argv[1]

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(32, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2); self.fc = nn.Linear(32, 10)
    def forward(self, x):
        return self.fc(self.enc(self.inp(x)).mean(1))

class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(32, 32, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(64, 10)
    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])

class Pooled(nn.Module):
    """Operators without a portable kernel: refused by name."""
    def __init__(self):
        super().__init__(); self.fc = nn.Linear(32, 10)
    def forward(self, x):
        return self.fc(torch.cumsum(x, -1))

# Weights from numpy: the same on every CPU (torch's own random fill differs with the vector
# width). Constant tensors (batch norm's ones and zeros) stay as built.
rng = np.random.RandomState(7)
def numpy_weights(m):
    with torch.no_grad():
        for name, p in sorted(m.named_parameters()):
            fan_in = p[0].numel() if p.dim() >= 2 else p.numel()
            if p.dim() == 1 and bool((p == p.flatten()[0]).all()):
                continue
            bound = 1.0 / np.sqrt(fan_in)
            p.copy_(torch.from_numpy(rng.uniform(-bound, bound, p.shape).astype(np.float32)))
    return m

for name, m in [("resnet18", tvm.resnet18(num_classes=10)),
                ("mobilenet_v2", tvm.mobilenet_v2(num_classes=10)),
                ("encoder", Encoder()), ("lstm", Lstm()), ("pooled", Pooled())]:
    torch.jit.script(numpy_weights(m)).save("%s/%s.pt" % (out, name))

d = load_digits()
pixels = (d.images / 16.0).astype(np.float32)[:64]
targets = d.target.astype(np.int64)[:64]
images = np.kron(pixels, np.ones((4, 4), np.float32))[:, None].repeat(3, axis=1)
rows = np.tile(pixels, (1, 1, 4))  # [64, 8, 32]: 8 steps of 32 features
for name, inputs in [("images", images), ("rows", rows)]:
    with open("%s/%s.safetensors" % (out, name), "wb") as f:
        f.write(safetensors_bytes({"inputs": ("F32", inputs), "targets": ("I64", targets)}))
)PY";

std::vector<reference::Setting> settings() { return reference::settings({1, 2}); }

class RealModels : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    if (!reference::have_modules("torch, torchvision, sklearn")) return;
    dir_ = new testing::ScratchDir();
    if (!write_file_atomic(*dir_ / "models.py", std::string(kModels)).ok()) {
      made_ = "cannot write models.py";
      return;
    }
    auto made = run_command(in() + kPython + " models.py " + dir_->path().string() + " " +
                                std::string(VT_SOURCE_DIR) + "/scripts",
                            dir_->path());
    made_ = made.exit_code == 0 ? "" : "models.py: " + made.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (dir_ == nullptr) GTEST_SKIP() << "python3-torch, -torchvision or -sklearn not installed";
    ASSERT_EQ(made_, "");
  }
  static std::string in() { return "cd '" + dir_->path().string() + "' && "; }
  static std::string data_of(const std::string& model) {
    return model == "resnet18" || model == "mobilenet_v2" ? "images" : "rows";
  }

  static testing::ScratchDir* dir_;
  static std::string made_;
};
testing::ScratchDir* RealModels::dir_ = nullptr;
std::string RealModels::made_;

TEST_P(RealModels, TrainPortablyToTheSameRootsOnEverySettingAndVerifyOnAnother) {
  const std::string model = GetParam();
  const std::string task = model + ".json";
  // task init chooses portable by itself, and says so.
  auto init =
      run_command(in() + veritrain_binary() + " task init --model torchscript --model-file " +
                      model + ".pt --dataset tensors --data-file " + data_of(model) +
                      ".safetensors --eval-fraction 0.25 --epochs 1 --steps-per-epoch 2 "
                      "--batch-size 4 --out " +
                      task,
                  dir_->path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  EXPECT_EQ(nlohmann::json::parse(*read_text_file(dir_->path() / task))["determinism"], "portable")
      << init.err;
  const std::vector<Setting> all = settings();
  std::vector<std::string> reference;
  for (const Setting& s : all) {
    const std::string wd = "w-" + model + "-" + s.name();
    auto r = run_command(in() + s.env() + veritrain_binary() + " train --task " + task +
                             " --workdir " + wd + " --threads " + std::to_string(s.threads),
                         dir_->path());
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
      {"mobilenet_v2",
       {"hardtanh", "hardtanh_backward", "row_mean", "conv", "batch_norm_backward"}},
      {"encoder", {"layer_norm", "softmax", "dropout", "gemm", "baddbmm", "baddbmm_backward"}},
      {"lstm", {"rnn", "rnn_backward", "gemm", "cross_entropy"}}};
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
                         ::testing::Values("resnet18", "mobilenet_v2", "encoder", "lstm"),
                         testing::ValueName());

// An operator without a portable kernel: task init --determinism portable refuses it by name and
// by the line of the module's code; unasked, task init picks exact and says which operator.
TEST_F(RealModels, AnOperatorWithoutAKernelIsRefusedByNameAndLine) {
  auto refused = run_command(in() + veritrain_binary() +
                                 " task init --determinism portable --model torchscript "
                                 "--model-file pooled.pt --out pooled.json",
                             dir_->path());
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("aten::cumsum"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("models.py:"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("`return self.fc(torch.cumsum(x, -1))`"), std::string::npos)
      << refused.err;
  EXPECT_FALSE(fs::exists(dir_->path() / "pooled.json"));
  auto fallback = run_command(in() + veritrain_binary() +
                                  " task init --model torchscript --model-file pooled.pt --out "
                                  "pooled.json",
                              dir_->path());
  ASSERT_EQ(fallback.exit_code, 0) << fallback.err;
  EXPECT_NE(fallback.err.find("task init: determinism exact, not portable: "), std::string::npos)
      << fallback.err;
  EXPECT_NE(fallback.err.find("aten::cumsum"), std::string::npos) << fallback.err;
  // Short lines that say it once: what it means, and what to do.
  std::istringstream lines(fallback.err);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("aten::cumsum") == std::string::npos) {
      EXPECT_LE(line.size(), 100u) << line;
    }
  }
  const std::size_t pin = fallback.err.find("--pin-environment");
  ASSERT_NE(pin, std::string::npos) << fallback.err;
  EXPECT_EQ(fallback.err.find("--pin-environment", pin + 1), std::string::npos) << fallback.err;
  EXPECT_EQ(fallback.err.find("warning:"), std::string::npos) << fallback.err;
  EXPECT_EQ(nlohmann::json::parse(*read_text_file(dir_->path() / "pooled.json"))["determinism"],
            "exact");
}

}  // namespace
}  // namespace vt
