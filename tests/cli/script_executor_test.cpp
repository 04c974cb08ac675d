// Exact-mode TorchScript modules replay in a fresh process (docs/training.md, "TorchScript's
// executor"). Before the executor was fixed, LibTorch's profiling executor gave a module's later
// calls other arithmetic than its first, so a verifier replaying epoch 2 from call 1 rejected an
// honest provider on its own machine. Real modules from torch.nn (tests/cli/requestor_modules.py),
// scripted by Debian's torch, on sklearn's digits: each trains 2 epochs x 3 steps and a `verify
// --check-probability 1` in other processes accepts it; `task check` passes.

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "tests/cli/python_made.h"
#include "tests/test_util.h"

namespace vt {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::veritrain_binary;

class ScriptExecutor : public ::testing::Test {
 protected:
  // The modules and data of tests/cli/requestor_modules.py, made once (python_made.h) and copied
  // into this process's folder. A failure to make them fails every test (a failure in
  // SetUpTestSuite would only skip them).
  static void SetUpTestSuite() {
    dir_ = testing::copy_of_made("requestor_modules.py", {"make_digits.py", "requestor_nets.py"},
                                 "torch, sklearn", made_);
  }
  static void TearDownTestSuite() { dir_.reset(); }
  void SetUp() override {
    ASSERT_EQ(made_, "");
    if (dir_ == nullptr) GTEST_SKIP() << "python3-torch or python3-sklearn not installed";
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
      std::string command = in() + veritrain_binary();
      command.append(" verify --task ").append(model).append(".json --workdir w-").append(model);
      command.append(" --check-probability 1 --jobs ").append(jobs);
      auto verify = run_command(
          command.append(" --report r-").append(model).append("-").append(jobs), dir_->path());
      EXPECT_EQ(verify.exit_code, 0) << model << ", --jobs " << jobs << ":\n"
                                     << verify.out << verify.err;
    }
    // The executor is committed with the arithmetic environment.
    const std::string log = *read_text_file(dir_->path() / ("w-" + model) / "commitments.log");
    const auto first = nlohmann::json::parse(log.substr(0, log.find('\t')));
    EXPECT_EQ(first["environment"]["script_executor"], "graph-executor-optimize-off") << model;
  }

  static std::unique_ptr<testing::ScratchDir> dir_;
  static std::string made_;
};
std::unique_ptr<testing::ScratchDir> ScriptExecutor::dir_;
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
  auto probe = run_command(in() + testing::kPython + " probe.py", dir_->path());
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  EXPECT_NE(probe.out.find("default False fixed True"), std::string::npos) << probe.out;
}

}  // namespace
}  // namespace vt
