// loss "model" (the module's forward(inputs, targets) is the loss) trains and verifies, and
// `export` writes what Python torch loads back: the module by torch.jit.load, the weights by
// load_state_dict, equal to veritrain's committed state.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/model_fixtures.h"

namespace vt {
namespace {

using testing::run_command;
using testing::veritrain_binary;
namespace fs = std::filesystem;

// Reads safetensors with numpy alone (the safetensors package is not a dependency), loads the
// export both ways and compares against the committed snapshot and across the two loads.
constexpr const char* kRoundTrip = R"PY(
import json, struct, sys
import numpy as np, torch
DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32, "U8": np.uint8}
def read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        arr = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out
exported_module, weights, snapshot, original = sys.argv[1:5]
averaged = sys.argv[5:] == ["average"]  # the snapshot's ema/ tensors where it keeps them
state = read(weights)
snap = read(snapshot)
assert state and all("/" not in k for k in state), sorted(state)
assert averaged == any(k.startswith("ema/") for k in snap) or sys.argv[5:] == ["trained"]
for k, v in state.items():
    committed = snap.get("param/" + k, snap.get("buffer/" + k))
    if averaged and "ema/" + k in snap:
        assert not torch.equal(committed, snap["ema/" + k]), k
        committed = snap["ema/" + k]
    assert committed is not None and torch.equal(committed, v), k
module = torch.jit.load(exported_module)
net = torch.jit.load(original)
net.load_state_dict(state)
for k, v in module.state_dict().items():
    assert torch.equal(v, state[k]), k
module.eval(); net.eval()
x = torch.from_numpy(np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32))
a, b = module(x), net(x)
assert torch.equal(a, b)
print("ok", len(state), "tensors; logits", tuple(a.shape))
)PY";

class Export : public ::testing::Test {
 protected:
  void SetUp() override {
    fx_ = testing::model_fixtures();
    if (fx_.empty())
      GTEST_SKIP() << "python3-torch / python3-sklearn not installed (scripts/setup.sh)";
  }
  // Trains `module` for 2 epochs; returns the task file.
  std::string train(const std::string& module, const std::string& extra) {
    const std::string task = (dir_ / "task.json").string();
    auto init = run_command(veritrain_binary() + " task init --model torchscript --model-file " +
                                (fx_ / module).string() +
                                " --epochs 2 --steps-per-epoch 6 --batch-size 16 " + extra +
                                " --out " + task,
                            dir_.path());
    EXPECT_EQ(init.exit_code, 0) << init.err;
    auto t = run_command(
        veritrain_binary() + " train --task " + task + " --workdir " + (dir_ / "w").string(),
        dir_.path());
    EXPECT_EQ(t.exit_code, 0) << t.err;
    return task;
  }
  // `task check`, then a verify that challenges every epoch; returns the verify.
  testing::CommandResult check_and_verify(const std::string& task) {
    auto check = run_command(veritrain_binary() + " task check " + task, dir_.path());
    EXPECT_EQ(check.exit_code, 0) << check.err;
    return run_command(veritrain_binary() + " verify --task " + task + " --workdir " +
                           (dir_ / "w").string() + " --check-probability 1 --report " +
                           (dir_ / "report").string(),
                       dir_.path());
  }
  fs::path fx_;
  testing::ScratchDir dir_;
};

TEST_F(Export, ModelLossWithDropoutTrainsAndVerifies) {
  const std::string task = train("model_loss.pt", "--loss model --optimizer adam");
  auto v = check_and_verify(task);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("ACCEPTED"), std::string::npos) << v.out;
  // A zoo model has no forward(inputs, targets).
  auto zoo = run_command(veritrain_binary() + " task init --model mlp --loss model", dir_.path());
  EXPECT_EQ(zoo.exit_code, 2);
  EXPECT_NE(zoo.err.find("loss: \"model\""), std::string::npos) << zoo.err;
}

// Evaluation of a module with its own loss calls forward(inputs, targets) too: the held-out
// metric is that loss (no accuracy without logits). It used to call forward(inputs) and stop
// after epoch 0 was committed.
TEST_F(Export, ModelLossWithAHeldOutSplitTrainsAndVerifiesItsEvalLoss) {
  auto made = run_command(testing::kPython + " " + VT_SOURCE_DIR + "/scripts/make_digits.py " +
                              (dir_ / "data").string(),
                          dir_.path());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string task =
      train("digits_loss.pt", "--loss model --dataset tensors --data-file " +
                                  (dir_ / "data/digits-train.safetensors").string() +
                                  " --eval-fraction 0.2");
  auto v = check_and_verify(task);
  ASSERT_EQ(v.exit_code, 0) << v.out << v.err;
  auto verdict = nlohmann::json::parse(*read_text_file(dir_ / "report/verdict.json"));
  const nlohmann::json& checks = verdict["verdict"]["checks"];
  ASSERT_EQ(checks.size(), 2u) << verdict.dump();
  for (const auto& c : checks) {
    const nlohmann::json& eval = c["metrics"]["eval"];
    EXPECT_EQ(eval["status"], "verified") << c.dump();
    EXPECT_TRUE(eval["claimed"]["accuracy"].is_null()) << c.dump();
    EXPECT_GT(eval["claimed"]["loss"].get<double>(), 0.0) << c.dump();
  }
}

// Python that loads exported weights (argv[3]) into reference/veritrain_zoo.py (argv[1]) for the
// task argv[2], strictly: every name and shape must be the zoo module's.
constexpr const char* kLoadZooModel = R"(import json, sys
import torch, torch.nn.functional as F
sys.path.insert(0, sys.argv[1])
from ref_common import read_safetensors
from veritrain_zoo import build
task = json.load(open(sys.argv[2]))
net = build(task["model"]["name"], task["model"]["options"])
_, weights = read_safetensors(sys.argv[3])
net.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
)";

// A built-in model on a requestor's own data: task init sizes it from the files (it used to keep
// the defaults and fail at train), says what it filled, and lists every option; the exported
// weights load into reference/veritrain_zoo.py's module, whose held-out loss is the one veritrain
// committed.
TEST_F(Export, AZooModelSizesItselfFromOwnDataAndItsWeightsLoadInThePythonZoo) {
  auto made = run_command(testing::kPython + " " + VT_SOURCE_DIR + "/scripts/make_digits.py " +
                              (dir_ / "data").string(),
                          dir_.path());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string task = (dir_ / "task.json").string();
  auto init =
      run_command(veritrain_binary() + " task init --model mlp --dataset tensors --data-file " +
                      (dir_ / "data/digits-train.safetensors").string() + " --eval-file " +
                      (dir_ / "data/digits-eval.safetensors").string() +
                      " --epochs 2 --steps-per-epoch 6 --batch-size 32 --out " + task,
                  dir_.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  EXPECT_NE(init.err.find("model.options input_dim = 64, classes = 10 from the data"),
            std::string::npos)
      << init.err;
  auto t = run_command(
      veritrain_binary() + " train --task " + task + " --workdir " + (dir_ / "w").string(),
      dir_.path());
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.err.find("held-out loss"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("epoch 0 committed  root "), std::string::npos) << t.err;
  EXPECT_EQ(t.err.find("loss 0.0000"), std::string::npos) << "epoch 0 trained nothing: " << t.err;
  auto e = run_command(veritrain_binary() + " export --workdir " + (dir_ / "w").string() +
                           " --epoch 2 --safetensors " + (dir_ / "model.safetensors").string(),
                       dir_.path());
  ASSERT_EQ(e.exit_code, 0) << e.err;
  auto log = run_command(
      veritrain_binary() + " --json inspect " + (dir_ / "w/commitments.log").string(), dir_.path());
  ASSERT_EQ(log.exit_code, 0) << log.err;
  const double committed =
      nlohmann::json::parse(log.out)["records"][2]["eval"]["loss"].get<double>();

  const std::string python = std::string(kLoadZooModel) + R"(net.eval()
_, data = read_safetensors(sys.argv[4])
with torch.no_grad():
    logits = net(torch.from_numpy(data["inputs"]))
loss = F.cross_entropy(logits.double(), torch.from_numpy(data["targets"]))
print("%.17g" % loss.item())
)";
  ASSERT_TRUE(write_file_atomic(dir_ / "zoo.py", python).ok());
  auto py = run_command(testing::kPython + " " + (dir_ / "zoo.py").string() + " " + VT_SOURCE_DIR +
                            "/reference " + task + " " + (dir_ / "model.safetensors").string() +
                            " " + (dir_ / "data/digits-eval.safetensors").string(),
                        dir_.path());
  ASSERT_EQ(py.exit_code, 0) << py.err;
  const double python_loss = std::stod(py.out);
  EXPECT_NEAR(python_loss, committed, 1e-5 * std::max(1.0, committed))
      << "veritrain committed " << committed << ", the Python zoo module gives " << python_loss;

  auto list =
      run_command(veritrain_binary() + " task init --model mlp --list-options", dir_.path());
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("input_dim  default 32, 1..1048576"), std::string::npos) << list.out;
  // A forward(inputs, targets) module without --loss model: the failure names the fix.
  auto ts =
      run_command(veritrain_binary() + " task init --model torchscript --model-file " +
                      (fx_ / "model_loss.pt").string() + " --out " + (dir_ / "ts.json").string(),
                  dir_.path());
  if (ts.exit_code == 0)
    ts =
        run_command(veritrain_binary() + " task check " + (dir_ / "ts.json").string(), dir_.path());
  EXPECT_EQ(ts.exit_code, 2) << ts.err;
  EXPECT_NE(ts.err.find("task init --loss model"), std::string::npos) << ts.err;
}

// The gpt on a requestor's own tokens: its exported weights load into reference/veritrain_zoo.py's
// Gpt, whose held-out loss over the eval file's disjoint windows is the one veritrain committed;
// a conv3d's load strictly into its Conv3dNet.
TEST_F(Export, GptAndConv3dWeightsLoadInThePythonZoo) {
  const std::string make = R"(import numpy as np, sys
r = np.random.default_rng(1)
def seq(n):
    t = [int(r.integers(64))]
    for _ in range(n - 1):
        t.append((t[-1] * 3 + 1) % 64 if r.random() < 0.8 else int(r.integers(64)))
    return np.array(t, dtype="<u2")
seq(20000).tofile(sys.argv[1] + "/train.bin")
seq(2000).tofile(sys.argv[1] + "/val.bin")
)";
  fs::create_directories(dir_ / "data");
  ASSERT_TRUE(write_file_atomic(dir_ / "make.py", make).ok());
  ASSERT_EQ(run_command(testing::kPython + " " + (dir_ / "make.py").string() + " " +
                            (dir_ / "data").string(),
                        dir_.path())
                .exit_code,
            0);
  const std::string task = (dir_ / "task.json").string();
  ASSERT_EQ(
      run_command(veritrain_binary() + " task init --model gpt --dataset tokens --data-file " +
                      (dir_ / "data/train.bin").string() + " --eval-file " +
                      (dir_ / "data/val.bin").string() + " --epochs 2 --steps-per-epoch 8 --out " +
                      task,
                  dir_.path())
          .exit_code,
      0);
  auto t = run_command(
      veritrain_binary() + " train --task " + task + " --workdir " + (dir_ / "w").string(),
      dir_.path());
  ASSERT_EQ(t.exit_code, 0) << t.err;
  ASSERT_EQ(run_command(veritrain_binary() + " export --workdir " + (dir_ / "w").string() +
                            " --epoch 2 --safetensors " + (dir_ / "gpt.safetensors").string(),
                        dir_.path())
                .exit_code,
            0);
  auto log = run_command(
      veritrain_binary() + " --json inspect " + (dir_ / "w/commitments.log").string(), dir_.path());
  ASSERT_EQ(log.exit_code, 0) << log.err;
  const double committed =
      nlohmann::json::parse(log.out)["records"][2]["eval"]["loss"].get<double>();
  const std::string python = std::string(kLoadZooModel) + R"(import numpy as np
net.eval()
L = task["model"]["options"]["seq_len"]
tokens = np.fromfile(sys.argv[4], dtype="<u2").astype(np.int64)
windows = np.stack([tokens[i:i + L + 1] for i in range(0, len(tokens) - L, L + 1)])
with torch.no_grad():
    logits = net(torch.from_numpy(windows[:, :-1]))
loss = F.cross_entropy(logits.double().reshape(-1, logits.shape[-1]),
                       torch.from_numpy(windows[:, 1:]).reshape(-1))
print("%.17g" % loss.item())
)";
  ASSERT_TRUE(write_file_atomic(dir_ / "gpt.py", python).ok());
  auto py = run_command(testing::kPython + " " + (dir_ / "gpt.py").string() + " " + VT_SOURCE_DIR +
                            "/reference " + task + " " + (dir_ / "gpt.safetensors").string() + " " +
                            (dir_ / "data/val.bin").string(),
                        dir_.path());
  ASSERT_EQ(py.exit_code, 0) << py.err;
  EXPECT_NEAR(std::stod(py.out), committed, 1e-5 * std::max(1.0, committed))
      << "veritrain committed " << committed << ", the Python zoo Gpt gives " << py.out;

  const std::string conv = (dir_ / "conv3d.json").string();
  ASSERT_EQ(run_command(veritrain_binary() +
                            " task init --model conv3d --option size=4 --epochs 1 "
                            "--steps-per-epoch 1 --out " +
                            conv,
                        dir_.path())
                .exit_code,
            0);
  ASSERT_EQ(run_command(veritrain_binary() + " train --task " + conv + " --workdir " +
                            (dir_ / "w3").string(),
                        dir_.path())
                .exit_code,
            0);
  ASSERT_EQ(run_command(veritrain_binary() + " export --workdir " + (dir_ / "w3").string() +
                            " --epoch 1 --safetensors " + (dir_ / "conv3d.safetensors").string(),
                        dir_.path())
                .exit_code,
            0);
  const std::string load =
      std::string(kLoadZooModel) + R"(print(tuple(net(torch.zeros(2, 1, 4, 4, 4)).shape))
)";
  ASSERT_TRUE(write_file_atomic(dir_ / "conv3d.py", load).ok());
  auto loaded =
      run_command(testing::kPython + " " + (dir_ / "conv3d.py").string() + " " + VT_SOURCE_DIR +
                      "/reference " + conv + " " + (dir_ / "conv3d.safetensors").string(),
                  dir_.path());
  ASSERT_EQ(loaded.exit_code, 0) << loaded.err;
  EXPECT_EQ(loaded.out, "(2, 1, 4, 4, 4)\n");
}

TEST_F(Export, TorchScriptAndSafetensorsLoadBackInPython) {
  train("ts_synthetic.pt", "");
  const std::string w = (dir_ / "w").string();
  const auto pt = dir_ / "out.pt", st = dir_ / "out.safetensors", snap = dir_ / "snap";
  auto e = run_command(veritrain_binary() + " export --workdir " + w + " --epoch 2 --torchscript " +
                           pt.string() + " --safetensors " + st.string(),
                       dir_.path());
  ASSERT_EQ(e.exit_code, 0) << e.err;
  auto i = run_command(veritrain_binary() + " inspect " + w + " --epoch 2 --out " + snap.string(),
                       dir_.path());
  ASSERT_EQ(i.exit_code, 0) << i.err;
  ASSERT_TRUE(write_file_atomic(dir_ / "roundtrip.py", std::string_view(kRoundTrip)).ok());
  auto py = run_command(testing::kPython + " " + (dir_ / "roundtrip.py").string() + " " +
                            pt.string() + " " + st.string() + " " + snap.string() + " " +
                            (fx_ / "ts_synthetic.pt").string(),
                        dir_.path());
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
  EXPECT_NE(py.out.find("ok 9 tensors; logits (16, 4)"), std::string::npos) << py.out << py.err;

  // The exported weights are epoch 2's, not the file's initial ones.
  auto e0 = run_command(veritrain_binary() + " export --workdir " + w +
                            " --epoch 0 --safetensors " + (dir_ / "e0.safetensors").string(),
                        dir_.path());
  ASSERT_EQ(e0.exit_code, 0) << e0.err;
  EXPECT_NE(*read_file(dir_ / "e0.safetensors"), *read_file(st));

  auto missing = run_command(
      veritrain_binary() + " export --workdir " + w + " --epoch 9 --safetensors x", dir_.path());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--epoch 9: not committed"), std::string::npos) << missing.err;
}

// optimizer.ema_decay: the module and weights export as the moving average by default, and as the
// trained weights when asked (a task without an average: ZooModelsExportSafetensorsButNot...).
TEST_F(Export, TheMovingAverageIsExportedUnlessTheTrainedWeightsAreAskedFor) {
  train("ts_synthetic.pt", "--ema-decay 0.9");
  const std::string w = (dir_ / "w").string();
  const auto snap = dir_ / "snap";
  auto i = run_command(veritrain_binary() + " inspect " + w + " --epoch 2 --out " + snap.string(),
                       dir_.path());
  ASSERT_EQ(i.exit_code, 0) << i.err;
  ASSERT_TRUE(write_file_atomic(dir_ / "roundtrip.py", std::string_view(kRoundTrip)).ok());
  for (const std::string weights : {"average", "trained"}) {
    const auto pt = dir_ / (weights + ".pt"), st = dir_ / (weights + ".safetensors");
    auto e = run_command(veritrain_binary() + " --json export --workdir " + w +
                             " --epoch 2 --torchscript " + pt.string() + " --safetensors " +
                             st.string() + (weights == "trained" ? " --weights trained" : ""),
                         dir_.path());
    ASSERT_EQ(e.exit_code, 0) << e.err;
    EXPECT_EQ(nlohmann::json::parse(e.out)["weights"], weights);
    auto py = run_command(testing::kPython + " " + (dir_ / "roundtrip.py").string() + " " +
                              pt.string() + " " + st.string() + " " + snap.string() + " " +
                              (fx_ / "ts_synthetic.pt").string() + " " + weights,
                          dir_.path());
    EXPECT_EQ(py.exit_code, 0) << weights << ": " << py.out << py.err;
  }
  EXPECT_NE(*read_file(dir_ / "average.safetensors"), *read_file(dir_ / "trained.safetensors"));
}

TEST_F(Export, ZooModelsExportSafetensorsButNotTorchScript) {
  testing::ScratchDir& d = dir_;
  const std::string task = (d / "mlp.json").string();
  ASSERT_EQ(run_command(veritrain_binary() +
                            " task init --model mlp --epochs 1 --steps-per-epoch 1 --out " + task,
                        d.path())
                .exit_code,
            0);
  ASSERT_EQ(
      run_command(veritrain_binary() + " train --task " + task + " --workdir " + (d / "m").string(),
                  d.path())
          .exit_code,
      0);
  auto ts = run_command(veritrain_binary() + " export --workdir " + (d / "m").string() +
                            " --epoch 1 --torchscript " + (d / "m.pt").string(),
                        d.path());
  EXPECT_EQ(ts.exit_code, 2);
  EXPECT_NE(ts.err.find("torchscript tasks only"), std::string::npos) << ts.err;
  auto st = run_command(veritrain_binary() + " --json export --workdir " + (d / "m").string() +
                            " --epoch 1 --safetensors " + (d / "m.safetensors").string(),
                        d.path());
  EXPECT_EQ(st.exit_code, 0) << st.err;
  const Bytes raw = *read_file(d / "m.safetensors");
  const std::string bytes(raw.begin(), raw.end());
  EXPECT_NE(bytes.find("\"body.0.weight\""), std::string::npos);
  EXPECT_EQ(bytes.find("param/"), std::string::npos);
  EXPECT_EQ(bytes.find("optim/"), std::string::npos);
  // A task without optimizer.ema_decay keeps no average to export.
  auto none = run_command(veritrain_binary() + " export --workdir " + (d / "m").string() +
                              " --epoch 1 --weights average --safetensors x",
                          d.path());
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("keeps no moving average"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace vt
