// Portable arithmetic version 1 (docs/portable.md, "Versions"), held by the roots it commits:
// fixed portable tasks (the zoo's mlp, cnn and gpt, and a scripted torchvision resnet18 with its
// weights from numpy) must commit exactly these roots on any machine. CI lands on whatever CPU
// it gets, so this is a cross-machine check each run; and a change that moves a portable bit
// fails here until the version moves (kernels/version.h) and the table with it.
//
// A task that names a version this veritrain does not implement: train and task check refuse
// it, verify replays nothing and names the version a verifier needs.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/bytes.h"
#include "common/file_io.h"
#include "common/sha256.h"
#include "tests/cli/reference_util.h"
#include "tests/test_util.h"

namespace vt {
namespace {

using reference::committed_roots;
using reference::kPython;
using testing::run_command;
using testing::veritrain_binary;

// Runs `command` inside `dir`.
testing::CommandResult run_in(const testing::ScratchDir& dir, const std::string& command) {
  return run_command("cd '" + dir.path().string() + "' && " + command, dir.path());
}

struct Pinned {
  const char* name;
  const char* flags;
  std::vector<std::string> roots;  // epochs 0, 1, 2
};
void PrintTo(const Pinned& p, std::ostream* os) { *os << p.name; }

const char* const kTraining = " --epochs 2 --steps-per-epoch 2 --batch-size 8";

// The zoo models initialise themselves portably (docs/portable.md, "Initialisation").
const Pinned kZoo[] = {
    {"mlp_sgd_nesterov",
     "--model mlp --optimizer sgd --nesterov",
     {"287edcbb2fbf5527b3681715659465933d0ae0fcf1e0d90cdf0554020952df28",
      "15c09f53642760f3cfb16442df90a260a5a4c14271683d27836284a3d96fb637",
      "0e0f8974f803d6f9b12e3566656e67210e06be5e7f6cb9d9b7f2134cd396bbe2"}},
    {"cnn_adam",
     "--model cnn --optimizer adam --option width=8",
     {"824f3da56e2126e8e4211e33a193f28177bf5a493705b9b02429b3b04a85a39e",
      "6eeb3cb616fcc7178d18e7ef7c5ea5058ebdba976c09519c5495b186c69408c0",
      "b397592b260312126848e485fc98c8495821c5224e404f5aefe65ebf6c180a55"}},
    {"gpt_dropout_adamw",
     "--model gpt --option dropout_permille=100 --option d_model=32",
     {"d3d15e93fabb368f628e526f93e0ba53a29d4710ac2a6b0c62f2161915ea106a",
      "7f0fe7cbea615784a525274a3045d0e305179c71aa020a1b2e84e20a5b923e0e",
      "4b376e71b1d093d065b664c1553bc8cec30ab2682cbe19c92c4fb447b414958e"}},
};

class PortableRoots : public ::testing::TestWithParam<Pinned> {};

TEST_P(PortableRoots, AFixedTaskCommitsTheRootsOfVersion1) {
  const Pinned& p = GetParam();
  testing::ScratchDir dir;
  auto init = run_in(dir, veritrain_binary() + " task init --determinism portable " + p.flags +
                              kTraining + " --out task.json");
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const auto task = nlohmann::json::parse(*read_text_file(dir / "task.json"));
  EXPECT_EQ(task.at("portable_arithmetic"), 1);
  auto r = run_in(dir, veritrain_binary() + " train --task task.json --workdir w");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(committed_roots(dir / "w" / "commitments.log"), p.roots)
      << p.name << ": portable arithmetic 1 moved; if that was meant, the version moves too "
      << "(kernels/version.h, docs/portable.md \"Versions\")";
}

INSTANTIATE_TEST_SUITE_P(Zoo, PortableRoots, ::testing::ValuesIn(kZoo),
                         [](const auto& info) { return std::string(info.param.name); });

// torchvision's resnet18, weights from numpy with a fixed seed (torch's own fill differs with the
// vector width); sklearn's digits as 32x32 images.
constexpr const char* kResnet = R"PY(
import sys, io
sys.path.insert(0, sys.argv[1])
import numpy as np, torch, torchvision.models as tvm
from sklearn.datasets import load_digits
from make_digits import safetensors_bytes
m = tvm.resnet18(num_classes=10)
rng = np.random.RandomState(11)
with torch.no_grad():
    for name, p in sorted(m.named_parameters()):
        if p.dim() == 1 and bool((p == p.flatten()[0]).all()):
            continue  # batch norm's ones and zeros
        bound = 1.0 / np.sqrt(p[0].numel() if p.dim() >= 2 else p.numel())
        p.copy_(torch.from_numpy(rng.uniform(-bound, bound, p.shape).astype(np.float32)))
torch.jit.script(m).save("resnet18.pt")
d = load_digits()
pixels = (d.images / 16.0).astype(np.float32)[:64]
images = np.kron(pixels, np.ones((4, 4), np.float32))[:, None].repeat(3, axis=1)
with open("images.safetensors", "wb") as f:
    f.write(safetensors_bytes({"inputs": ("F32", images),
                               "targets": ("I64", d.target.astype(np.int64)[:64])}))
)PY";

const std::vector<std::string> kResnetRoots = {
    "5e31845caf5e3970c733611cb18e66ab968b513eb5b4d381077ca8bd932c7d9d",
    "baf816cdc70f61d4c0fcdbd30f24d009170ea068ac8d5cdc01c99979135c6f1e",
    "a35ed0c8e4b143adf1c6c2fcfbd2d5c587b4a0e0159c7b43a55d87a777286e42",
};
// The roots commit the task_id, and with it the module's SHA-256: the bytes Debian 12's
// python3-torch 1.13 and python3-torchvision 0.14 write for it (with a fixed hash seed, since
// TorchScript's serialized code orders some entries by Python's hash).
constexpr const char* kResnetModuleSha256 =
    "01f03272314120556c7bdbc0a6904f12adbc321f29b5a922fe2ec2efd1803ab3";

TEST(PortableRootsScripted, Resnet18CommitsTheRootsOfVersion1) {
  if (!testing::have_python_modules("torch, torchvision, sklearn"))
    GTEST_SKIP() << "python3-torch, -torchvision or -sklearn not installed";
  testing::ScratchDir dir;
  ASSERT_TRUE(write_file_atomic(dir / "resnet.py", std::string(kResnet)).ok());
  auto made = run_in(
      dir, "PYTHONHASHSEED=0 " + kPython + " resnet.py " + std::string(VT_SOURCE_DIR) + "/scripts");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  auto module = read_file(dir / "resnet18.pt");
  ASSERT_TRUE(module.ok());
  if (hex_encode(sha256(*module)) != kResnetModuleSha256) {
    GTEST_SKIP() << "this python3-torch or -torchvision writes other bytes for resnet18 than "
                    "Debian 12's, so its task_id and roots are another task's";
  }
  auto init = run_in(dir, veritrain_binary() +
                              " task init --determinism portable --model torchscript "
                              "--model-file resnet18.pt --dataset tensors --data-file "
                              "images.safetensors" +
                              kTraining + " --out task.json");
  ASSERT_EQ(init.exit_code, 0) << init.err;
  auto r = run_in(dir, veritrain_binary() + " train --task task.json --workdir w");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(committed_roots(dir / "w" / "commitments.log"), kResnetRoots)
      << "portable arithmetic 1 moved for resnet18; if that was meant, the version moves too";
}

// A task from a veritrain with another edition of the arithmetic: nothing here can judge it.
TEST(PortableVersions, AnUnknownVersionIsRefusedByTrainAndNotReplayedByVerify) {
  testing::ScratchDir dir;
  auto init = run_in(dir, veritrain_binary() +
                              " task init --determinism portable --model mlp --epochs 1 "
                              "--steps-per-epoch 2 --batch-size 8 --out task.json");
  ASSERT_EQ(init.exit_code, 0) << init.err;
  auto trained = run_in(dir, veritrain_binary() + " train --task task.json --workdir w");
  ASSERT_EQ(trained.exit_code, 0) << trained.err;

  auto task = nlohmann::json::parse(*read_text_file(dir / "task.json"));
  task["portable_arithmetic"] = 2;
  ASSERT_TRUE(write_file_atomic(dir / "v2.json", task.dump(2)).ok());
  auto refused = run_in(dir, veritrain_binary() + " train --task v2.json --workdir w2");
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("portable_arithmetic"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("implements portable arithmetic 1"), std::string::npos) << refused.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "w2" / "commitments.log"));
  auto checked = run_in(dir, veritrain_binary() + " task check v2.json");
  EXPECT_EQ(checked.exit_code, 2) << checked.err;
  EXPECT_NE(checked.err.find("portable arithmetic 1"), std::string::npos) << checked.err;

  // A provider whose veritrain implements version 2 commits the version-2 task's id: the log,
  // re-signed with that id by docs/log.md's independent writer, is what it would send.
  auto shown = run_in(dir, veritrain_binary() + " task show v2.json --json");
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  const std::string v2_id = nlohmann::json::parse(shown.out).at("task_id");
  auto rekeyed = run_in(dir, kPython + " " + reference::script("log_writer_ref.py") +
                                 " w/commitments.log w/keys/signing.key.pem 2.0 0.5 " + v2_id);
  ASSERT_EQ(rekeyed.exit_code, 0) << rekeyed.err;
  ASSERT_TRUE(write_file_atomic(dir / "w" / "task.json", task.dump(2)).ok());
  auto v = run_in(dir, veritrain_binary() +
                           " verify --task v2.json --workdir w --check-probability 1 --report r");
  // Nothing is replayed in arithmetic 1, and the verdict names what would judge the run. (This
  // log is rejected besides: its fingerprints sample the positions version 1's task id derives,
  // which a genuine version-2 provider's would not; the verdict is inconclusive where the log
  // holds, as for any environment this verifier cannot reproduce: EnvironmentCliForged.)
  EXPECT_NE(v.err.find("not replaying"), std::string::npos) << v.out << v.err;
  EXPECT_EQ(v.out.find("replayed epoch"), std::string::npos) << v.out;
  auto verdict = read_text_file(dir / "r" / "verdict.json");
  ASSERT_TRUE(verdict.ok());
  EXPECT_NE(verdict->find(R"({"committed":"2","field":"portable_arithmetic","here":"1"})"),
            std::string::npos)
      << *verdict;
  EXPECT_NE(verdict->find("a veritrain that implements portable arithmetic 2"), std::string::npos)
      << *verdict;
}

}  // namespace
}  // namespace vt
