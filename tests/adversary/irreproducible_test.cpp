// Exact mode never rejects an honest provider (docs/verifier.md, "A second replay before a
// rejection"). torchaudio's wav2vec 2.0, which once trained to other roots run after run on one
// machine (LibTorch's GELU gradient read a transposed gradient from memory it never wrote:
// docs/training.md, "LibTorch's repaired kernels"), trains to the same roots and is accepted; a
// module that adds memory it never wrote to its output is inconclusive in verify, audit and
// dispute, never rejected, and `task check` refuses it; a provider that really cheats is still
// rejected, its second replay agreeing with the first. Modules:
// tests/cli/irreproducible_modules.py.

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "common/process.h"
#include "common/safetensors.h"
#include "protocol/keys.h"
#include "protocol/log.h"
#include "tests/adversary/forger.h"
#include "tests/cli/python_made.h"
#include "tests/test_util.h"

namespace vt::adversary {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::veritrain_binary;

// The provider's heap under another fixed pattern than the verifier's second replay (which
// scrambled_memory_environment gives): what a module reads of memory it never wrote then differs
// between the provider, the first replay and the second, whatever their allocation histories.
const std::string kProviderMemory =
    "env GLIBC_TUNABLES=glibc.malloc.perturb=51:glibc.malloc.mmap_max=0 ";

class Irreproducible : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::copy_of_made("irreproducible_modules.py", {"make_digits.py"},
                                 "torch, torchaudio", made_);
  }
  static void TearDownTestSuite() { dir_.reset(); }
  void SetUp() override {
    ASSERT_EQ(made_, "");
    if (dir_ == nullptr) GTEST_SKIP() << "python3-torch or python3-torchaudio not installed";
  }
  static fs::path at(const std::string& name) { return dir_->path() / name; }
  static testing::CommandResult veritrain(const std::string& args, const std::string& env = "") {
    return run_command(
        "cd '" + dir_->path().string() + "' && " + env + veritrain_binary() + " " + args,
        dir_->path());
  }
  // An exact task of `model` (a .pt of the folder) on the waveforms: 2 epochs x 2 steps. Exact
  // by request: wav2vec 2.0 trains portably since its operators came into the operator table
  // (#67), and what these tests hold to is LibTorch's own kernels.
  static void init(const std::string& model) {
    auto made = veritrain("task init --model torchscript --model-file " + model +
                          ".pt --dataset tensors --data-file waves.safetensors --epochs 2 "
                          "--steps-per-epoch 2 --batch-size 8 --determinism exact --out " +
                          model + ".json");
    ASSERT_EQ(made.exit_code, 0) << made.err;
    // An exact task is one to check in two fresh processes, and init says so.
    EXPECT_NE(made.err.find("next: veritrain task check " + model + ".json"), std::string::npos)
        << made.err;
  }
  static std::vector<Digest> roots(const std::string& workdir) {
    auto log = read_log(at(workdir) / "commitments.log");
    EXPECT_TRUE(log.ok()) << (log.ok() ? "" : log.error().message);
    std::vector<Digest> out;
    if (log.ok())
      for (const SignedRecord& r : log->records) out.push_back(r.record.root);
    return out;
  }
  static nlohmann::json verify(const std::string& model, const std::string& workdir,
                               const std::string& jobs, int expected_exit) {
    const std::string report = "report-" + workdir + "-" + jobs;
    auto r = veritrain("--json verify --task " + model + ".json --workdir " + workdir +
                       " --provider-key " + workdir +
                       "/keys/signing.pub.pem --check-probability "
                       "1 --jobs " +
                       jobs + " --report " + report);
    EXPECT_EQ(r.exit_code, expected_exit) << r.out << r.err;
    return r.exit_code == expected_exit ? nlohmann::json::parse(r.out) : nlohmann::json();
  }

  static std::unique_ptr<testing::ScratchDir> dir_;
  static std::string made_;
};
std::unique_ptr<testing::ScratchDir> Irreproducible::dir_;
std::string Irreproducible::made_;

TEST_F(Irreproducible, Wav2Vec2TrainsToTheSameRootsTwiceAndIsAccepted) {
  init("wav2vec2");
  ASSERT_EQ(veritrain("train --task wav2vec2.json --workdir w2v-a").exit_code, 0);
  // The second run with its heap under a fixed pattern: what LibTorch's GELU gradient used to
  // read of memory it never wrote would differ.
  auto second = veritrain("train --task wav2vec2.json --workdir w2v-b", kProviderMemory);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const std::vector<Digest> a = roots("w2v-a"), b = roots("w2v-b");
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a, b) << "epoch 1 and 2 roots differed between runs before the repair";
  for (const char* jobs : {"1", "2"}) {
    const nlohmann::json v = verify("wav2vec2", "w2v-a", jobs, 0);
    EXPECT_EQ(v["result"], "accepted");
    for (const auto& c : v["checks"]) EXPECT_TRUE(c["second_replay"].is_null()) << c.dump();
  }
  auto check = veritrain("task check wav2vec2.json");
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find("train to the same bits in two fresh processes"), std::string::npos)
      << check.out;
}

// The LibTorch fault itself, in Debian's Python torch: gelu_backward with a transposed gradient
// gives other values in two processes whose heaps hold other bytes. When this fails, LibTorch no
// longer needs the repair (training/libtorch_repairs.cpp).
TEST_F(Irreproducible, LibTorchsGeluGradientReadsMemoryItNeverWrote) {
  constexpr const char* kProbe = R"PY(
import hashlib, torch
torch.set_num_threads(1)
x = torch.randn(8, 16, 39, generator=torch.Generator().manual_seed(1))
g = torch.randn(8, 39, 16, generator=torch.Generator().manual_seed(2)).transpose(1, 2)
r = torch.ops.aten.gelu_backward(g, x)
d = torch.ops.aten.gelu_backward(g.contiguous(), x)
print(hashlib.sha256(r.numpy().tobytes()).hexdigest(), bool(torch.equal(r, d)))
)PY";
  ASSERT_TRUE(write_file_atomic(at("gelu_probe.py"), std::string(kProbe)).ok());
  const std::string probe = "cd '" + dir_->path().string() + "' && ";
  auto plain = run_command(probe + testing::kPython + " gelu_probe.py", dir_->path());
  auto scrambled =
      run_command(probe + kProviderMemory + testing::kPython + " gelu_probe.py", dir_->path());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(scrambled.exit_code, 0) << scrambled.err;
  EXPECT_NE(plain.out, scrambled.out) << "LibTorch's gelu_backward is deterministic here now";
  EXPECT_NE(plain.out.find("False"), std::string::npos) << plain.out;
}

TEST_F(Irreproducible, AModuleThatReadsUnwrittenMemoryIsInconclusiveNeverRejected) {
  init("unwritten");
  auto train = veritrain("train --task unwritten.json --workdir unwritten-w", kProviderMemory);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  for (const char* jobs : {"1", "2"}) {
    const nlohmann::json v = verify("unwritten", "unwritten-w", jobs, 5);
    if (v.is_null()) continue;
    EXPECT_EQ(v["result"], "inconclusive") << jobs;
    EXPECT_TRUE(v["reasons"].empty()) << v["reasons"].dump();
    for (const auto& c : v["checks"]) {
      EXPECT_FALSE(c["passed"].get<bool>());
      EXPECT_TRUE(c["failures"].empty()) << c["failures"].dump();
      EXPECT_FALSE(c["second_replay"]["agrees"].get<bool>()) << c.dump();
      // It names the first tensor that differed between the verifier's own two replays.
      EXPECT_NE(c["irreproducible"].get<std::string>().find("differ from each other (tensor "),
                std::string::npos)
          << c["irreproducible"];
    }
  }
  auto audit = veritrain("--json audit --task unwritten.json --workdir unwritten-w --epoch 1");
  EXPECT_EQ(audit.exit_code, 5) << audit.out << audit.err;
  EXPECT_NE(audit.out.find("\"result\":\"inconclusive\""), std::string::npos) << audit.out;
  auto check = veritrain("task check unwritten.json");
  EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
  EXPECT_NE(check.err.find("not reproducible: the first 2 steps, trained in two fresh processes"),
            std::string::npos)
      << check.err;
  EXPECT_NE(check.err.find("a nondeterministic operator"), std::string::npos) << check.err;
}

// A provider that changes its stored weights after training and re-signs its log: the verifier's
// two replays agree with each other and not with the commitment, so the epoch fails.
TEST_F(Irreproducible, ACheatIsStillRejectedWithTheSecondReplayAgreeing) {
  init("wav2vec2");
  ASSERT_EQ(veritrain("train --task wav2vec2.json --workdir w2v-cheat").exit_code, 0);
  auto task = load_task(at("wav2vec2.json").string());
  ASSERT_TRUE(task.ok());
  auto key = SigningKey::load(at("w2v-cheat") / "keys" / "signing.key.pem");
  ASSERT_TRUE(key.ok()) << key.error().message;
  auto forged = reforge_workdir(
      at("w2v-cheat"), *key, [&](std::uint64_t e, CommitRecord& r, Bytes& state) -> Status {
        if (e != 2) return {};
        VT_ASSIGN_OR_RETURN(state, shift_tensor(state, "param/m.aux.weight", 1.0, 0.01f));
        return commit_state(*task, e, state, r);
      });
  ASSERT_TRUE(forged.ok()) << forged.error().message;
  const nlohmann::json v = verify("wav2vec2", "w2v-cheat", "1", 1);
  ASSERT_FALSE(v.is_null());
  EXPECT_EQ(v["result"], "rejected");
  const nlohmann::json& c = v["checks"][1];
  EXPECT_EQ(c["epoch"], 2);
  EXPECT_FALSE(c["passed"].get<bool>());
  EXPECT_TRUE(c["second_replay"]["agrees"].get<bool>()) << c.dump();
  EXPECT_TRUE(c["irreproducible"].is_null());
  EXPECT_NE(c["replay_notes"].dump().find("reproduced the first bit for bit"), std::string::npos)
      << c["replay_notes"].dump();
  auto audit = veritrain("--json audit --task wav2vec2.json --workdir w2v-cheat --epoch 2");
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;
}

}  // namespace
}  // namespace vt::adversary
