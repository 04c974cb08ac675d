// Exact-mode TorchScript modules replay in a fresh process (docs/training.md, "TorchScript's
// executor"). Before the executor was fixed, LibTorch's profiling executor gave a module's later
// calls other arithmetic than its first, so a verifier replaying epoch 2 from call 1 rejected an
// honest provider on its own machine. Real modules from torch.nn, scripted by Debian's torch,
// on sklearn's digits: each trains 2 epochs x 3 steps and a `verify --check-probability 1` in
// other processes accepts it; `task check` passes.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "tests/cli/reference_util.h"
#include "tests/test_util.h"

namespace vt {
namespace {

namespace fs = std::filesystem;
using reference::kPython;
using testing::run_command;
using testing::veritrain_binary;

// Modules as a requestor writes them, and the data they train on: digits 8x8 scaled to 32x32
// RGB images, and the same digits as sequences of 8 rows of 8 pixels.
constexpr const char* kModules = R"PY(
import sys
sys.path.insert(0, sys.argv[2])
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
from sklearn.datasets import load_digits
from make_digits import safetensors_bytes
out = sys.argv[1]
torch.manual_seed(0)

class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 5); self.c2 = nn.Conv2d(6, 16, 5)
        self.f1 = nn.Linear(16 * 5 * 5, 120); self.f2 = nn.Linear(120, 84); self.f3 = nn.Linear(84, 10)
    def forward(self, x):
        x = F.avg_pool2d(torch.tanh(self.c1(x)), 2); x = F.avg_pool2d(torch.tanh(self.c2(x)), 2)
        return self.f3(torch.tanh(self.f2(torch.tanh(self.f1(x.flatten(1))))))

class Gates(nn.Module):
    """sigmoid, silu, max_pool2d and softmax."""
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1); self.fc = nn.Linear(8 * 16 * 16, 10)
    def forward(self, x):
        h = F.max_pool2d(F.silu(self.c(x)), 2)
        h = h * torch.sigmoid(h) * torch.softmax(h.flatten(2), -1).view_as(h)
        return self.fc(h.flatten(1))

class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 24, batch_first=True); self.fc = nn.Linear(24, 10)
    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2); self.fc = nn.Linear(32, 10)
    def forward(self, x):
        return self.fc(self.enc(self.inp(x)).mean(1))

for name, m in [("lenet", LeNet()), ("gates", Gates()), ("lstm", Lstm()), ("encoder", Encoder())]:
    torch.jit.script(m).save("%s/%s.pt" % (out, name))

d = load_digits()
pixels = (d.images / 16.0).astype(np.float32)[:256]
targets = d.target.astype(np.int64)[:256]
images = np.kron(pixels, np.ones((4, 4), np.float32))[:, None].repeat(3, axis=1)
for name, inputs in [("images", images), ("rows", pixels)]:
    with open("%s/%s.safetensors" % (out, name), "wb") as f:
        f.write(safetensors_bytes({"inputs": ("F32", inputs), "targets": ("I64", targets)}))
)PY";

class ScriptExecutor : public ::testing::Test {
 protected:
  // The modules and data, written once per test process. A failure to write them fails every
  // test (a failure in SetUpTestSuite would only skip them).
  static void SetUpTestSuite() {
    if (!reference::have_modules("torch, sklearn")) return;
    dir_ = new testing::ScratchDir();
    if (!write_file_atomic(*dir_ / "modules.py", std::string(kModules)).ok()) {
      made_ = "cannot write modules.py";
      return;
    }
    auto made = run_command(in() + kPython + " modules.py " + dir_->path().string() + " " +
                                std::string(VT_SOURCE_DIR) + "/scripts",
                            dir_->path());
    made_ = made.exit_code == 0 ? "" : "modules.py: " + made.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (dir_ == nullptr) GTEST_SKIP() << "python3-torch or python3-sklearn not installed";
    ASSERT_EQ(made_, "");
  }
  static std::string in() { return "cd '" + dir_->path().string() + "' && "; }

  // task init (exact), train, and a verify that replays every epoch in other processes.
  static void train_and_verify(const std::string& model, const std::string& data) {
    auto init = run_command(in() + veritrain_binary() +
                                " task init --determinism exact --model torchscript --model-file " +
                                model + ".pt --dataset tensors --data-file " + data +
                                ".safetensors --epochs 2 --steps-per-epoch 3 --batch-size 8 "
                                "--out " +
                                model + ".json",
                            dir_->path());
    ASSERT_EQ(init.exit_code, 0) << init.err;
    auto train = run_command(
        in() + veritrain_binary() + " train --task " + model + ".json --workdir w-" + model,
        dir_->path());
    ASSERT_EQ(train.exit_code, 0) << train.err;
    for (const char* jobs : {"1", "2"}) {
      auto verify = run_command(
          in() + veritrain_binary() + " verify --task " + model + ".json --workdir w-" + model +
              " --check-probability 1 --jobs " + jobs + " --report r-" + model + "-" + jobs,
          dir_->path());
      EXPECT_EQ(verify.exit_code, 0) << model << ", --jobs " << jobs << ":\n"
                                     << verify.out << verify.err;
    }
    // The executor is committed with the arithmetic environment.
    const std::string log = *read_text_file(dir_->path() / ("w-" + model) / "commitments.log");
    const auto first = nlohmann::json::parse(log.substr(0, log.find('\t')));
    EXPECT_EQ(first["environment"]["script_executor"], "graph-executor-optimize-off") << model;
  }

  static testing::ScratchDir* dir_;
  static std::string made_;
};
testing::ScratchDir* ScriptExecutor::dir_ = nullptr;
std::string ScriptExecutor::made_;

TEST_F(ScriptExecutor, LeNetWithTanhAndAvgPoolIsAcceptedInAnotherProcess) {
  train_and_verify("lenet", "images");
}
TEST_F(ScriptExecutor, SigmoidSiluMaxPoolAndSoftmaxAreAcceptedInAnotherProcess) {
  train_and_verify("gates", "images");
}
TEST_F(ScriptExecutor, AnLstmIsAcceptedInAnotherProcess) { train_and_verify("lstm", "rows"); }
TEST_F(ScriptExecutor, ATransformerEncoderIsAcceptedInAnotherProcess) {
  train_and_verify("encoder", "rows");
}

// The pre-flight replays k steps from a snapshot in a second process: it passes an honest module
// where it used to call it "not replayable".
TEST_F(ScriptExecutor, TaskCheckPassesLeNetAndATransformerEncoder) {
  for (const char* model : {"lenet", "encoder"}) {
    const std::string task = std::string(model) + "-check.json";
    auto init = run_command(in() + veritrain_binary() +
                                " task init --determinism exact --model torchscript --model-file " +
                                model + ".pt --dataset tensors --data-file " +
                                (std::string(model) == "lenet" ? "images" : "rows") +
                                ".safetensors --steps-per-epoch 3 --batch-size 8 --out " + task,
                            dir_->path());
    ASSERT_EQ(init.exit_code, 0) << init.err;
    auto check = run_command(in() + veritrain_binary() + " task check " + task, dir_->path());
    EXPECT_EQ(check.exit_code, 0) << model << ": " << check.err;
  }
}

// The mechanism, in Debian's Python torch: under LibTorch's default executor the gradients of a
// module's later calls differ from its first; with the optimisation off, as veritrain runs
// modules, every call gives the same bits.
TEST_F(ScriptExecutor, TheDefaultExecutorChangesArithmeticAfterTheFirstCallsAndOursDoesNot) {
  constexpr const char* kProbe = R"PY(
import sys, torch, torch.nn.functional as F
sys.argv = sys.argv[:1]
m = torch.jit.load("lenet.pt")
x = torch.rand(8, 3, 32, 32); y = torch.arange(8) % 10
def grads():
    out = []
    for _ in range(5):
        m.zero_grad()
        F.cross_entropy(m(x), y).backward()
        out.append(torch.cat([p.grad.flatten() for p in m.parameters()]))
    return [bool(torch.equal(out[0], g)) for g in out]
default = grads()
torch._C._set_graph_executor_optimize(False)
m = torch.jit.load("lenet.pt")
fixed = grads()
print("default", all(default), "fixed", all(fixed))
)PY";
  ASSERT_TRUE(write_file_atomic(*dir_ / "probe.py", std::string(kProbe)).ok());
  auto probe = run_command(in() + kPython + " probe.py", dir_->path());
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  EXPECT_NE(probe.out.find("default False fixed True"), std::string::npos) << probe.out;
}

}  // namespace
}  // namespace vt
