// Portable arithmetic (docs/portable.md) through the `veritrain` binary: one machine poses as
// others with ATEN_CPU_CAPABILITY (which also caps veritrain's kernels) and `train --threads`,
// and every setting commits the same roots, epoch 0 included, which a verifier under every other
// setting accepts. reference/portable_ref.py, numpy alone, replays the epochs bit for bit; a copy
// of it that sums one chain in another order does not.

#include <gtest/gtest.h>

#include <filesystem>
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
using reference::script;
using reference::Setting;
using testing::run_command;
using testing::veritrain_binary;

std::vector<reference::Setting> settings() { return reference::settings({1, 2, 4}); }

// The zoo as the portable arithmetic covers it: BatchNorm (cnn), 3-d convolutions, dropout
// (gpt), SGD with Nesterov momentum, Adam and AdamW, warmup into a cosine schedule; and the
// recipes of docs/task.md, binding: the gradient clipped in either norm, decay spared by either
// rule, labels smoothed.
struct Config {
  const char* name;
  const char* flags;
};
const Config kConfigs[] = {
    {"mlp_nesterov_cosine",
     "--model mlp --optimizer sgd --nesterov --weight-decay 0.01 --schedule cosine "
     "--warmup-steps 2"},
    {"cnn_adam", "--model cnn --optimizer adam --option width=8"},
    {"conv3d_adamw", "--model conv3d --optimizer adamw --option size=8"},
    {"gpt_dropout_adamw_cosine",
     "--model gpt --optimizer adamw --option dropout_permille=100 --option d_model=32 "
     "--schedule cosine --warmup-steps 2"},
    // The CIFAR-10 ResNet recipe (Nesterov, decay but not on norms and biases, cosine, crop with
    // padding 4 and flips, smoothed labels, a moving average of the weights), here also clipped
    // in the inf norm.
    {"cnn_cifar_recipe",
     "--model cnn --option width=8 --optimizer sgd --nesterov --weight-decay 5e-4 "
     "--no-decay norm_and_bias --schedule cosine --crop-padding 4 --padding-mode reflect --flip "
     "--label-smoothing 0.1 --clip-grad-norm 0.1 --clip-norm inf --ema-decay 0.999"},
    // nanoGPT's: AdamW (0.9, 0.95), decay 0.1 on the 2-d parameters, the norm clipped at 1.0,
    // cosine with warmup; and a binding clip with SGD and smoothed labels.
    {"nanogpt_recipe",
     "--model gpt --option d_model=32 --optimizer adamw --beta2 0.95 --weight-decay 0.1 "
     "--no-decay 1d --clip-grad-norm 1.0 --schedule cosine --warmup-steps 2 --ema-decay 0.9"},
    {"gpt_recipes_sgd",
     "--model gpt --optimizer sgd --momentum 0.9 --option d_model=32 --weight-decay 0.1 "
     "--clip-grad-norm 0.05 --no-decay 1d --label-smoothing 0.2"},
};

std::string write_task(const testing::ScratchDir& dir, const Config& c, const std::string& extra,
                       int batch = 8) {
  std::string file = (dir / (std::string(c.name) + ".json")).string();
  auto init = run_command(veritrain_binary() + " task init --determinism portable " + c.flags +
                              " --epochs 3 --steps-per-epoch 2 --batch-size " +
                              std::to_string(batch) + " " + extra + " --out " + file,
                          dir.path());
  EXPECT_EQ(init.exit_code, 0) << init.err;
  return file;
}

// Trains `task` under every setting into dir/w-<setting>: each commits `roots` roots (epoch 0
// included), the same as the first setting's.
void train_under_every_setting(const testing::ScratchDir& dir, const std::string& task,
                               std::size_t roots) {
  const std::vector<Setting> all = settings();
  std::vector<std::string> reference;
  for (const Setting& s : all) {
    const fs::path wd = dir / ("w-" + s.name());
    auto r = run_command(s.env() + veritrain_binary() + " train --task " + task + " --workdir " +
                             wd.string() + " --threads " + std::to_string(s.threads),
                         dir.path());
    ASSERT_EQ(r.exit_code, 0) << s.name() << ": " << r.err;
    const auto committed = committed_roots(wd / "commitments.log");
    ASSERT_EQ(committed.size(), roots) << s.name();
    if (reference.empty()) reference = committed;
    EXPECT_EQ(committed, reference) << s.name() << " against " << all.front().name();
  }
}

class PortableAcrossMachines : public ::testing::TestWithParam<Config> {};

TEST_P(PortableAcrossMachines, EverySettingCommitsTheSameRootsAndVerifiesEveryOther) {
  testing::ScratchDir dir;
  const std::string task = write_task(dir, GetParam(), "");
  const std::vector<Setting> all = settings();
  ASSERT_NO_FATAL_FAILURE(train_under_every_setting(dir, task, 4));
  // Each workdir verified under the next setting: another capability or thread count.
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Setting& at = all[(i + 1) % all.size()];
    const fs::path report = dir / ("report-" + all[i].name());
    auto v = run_command(at.env() + veritrain_binary() + " verify --task " + task + " --workdir " +
                             (dir / ("w-" + all[i].name())).string() +
                             " --check-probability 1 --jobs 1 --threads " +
                             std::to_string(at.threads) + " --report " + report.string(),
                         dir.path());
    EXPECT_EQ(v.exit_code, 0) << all[i].name() << " verified at " << at.name() << ": " << v.out
                              << v.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, PortableAcrossMachines, ::testing::ValuesIn(kConfigs),
                         [](const auto& info) { return std::string(info.param.name); });

// Bytes of one of Debian's fortune files as little-endian u16 tokens.
Bytes fortune_tokens(const std::string& name) {
  Bytes out;
  auto text = read_file(fs::path("/usr/share/games/fortunes") / name);
  EXPECT_TRUE(text.ok()) << name;
  if (!text.ok()) return out;
  for (std::uint8_t b : *text) {
    out.push_back(b);
    out.push_back(0);
  }
  return out;
}

// nanoGPT's recipe, written with `task init` flags alone, on real text: Debian's fortunes as a
// byte-level u16 token file with a held-out file; AdamW (0.9, 0.95), decay 0.1 on the 2-d
// parameters only, the norm clipped at 1.0, cosine with warmup, 4 gradient groups and a moving
// average of the weights. Every setting and 2 ranks commit the same roots, the ranks recomputing
// activations in the backward pass (train --checkpoint-activations), and a verify under another
// setting accepts, its two replay workers checkpointing too. (reference/portable_ref.py reads
// synthetic data alone: it replays the same recipe in nanogpt_recipe above.)
TEST(PortableRecipes, NanoGptOnAFortunesTokenFileIsTheSameEverywhere) {
  if (!fs::exists("/usr/share/games/fortunes/cookie"))
    GTEST_SKIP() << "Debian's fortunes package is not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  fs::create_directories(dir / "data");
  ASSERT_TRUE(write_file_atomic(dir / "data" / "train.bin", fortune_tokens("computers")).ok());
  ASSERT_TRUE(write_file_atomic(dir / "data" / "eval.bin", fortune_tokens("education")).ok());
  const std::string task = (dir / "nanogpt.json").string();
  auto init = run_command(
      "cd " + dir.path().string() + " && " + veritrain_binary() +
          " task init --determinism portable --model gpt --dataset tokens --option vocab=256 "
          "--option d_model=32 --option heads=4 --option layers=1 --context 16 "
          "--data-file data/train.bin --eval-file data/eval.bin --optimizer adamw --lr 0.003 "
          "--beta2 0.95 --weight-decay 0.1 --no-decay 1d --clip-grad-norm 1.0 --schedule cosine "
          "--warmup-steps 2 --gradient-groups 4 --ema-decay 0.99 --epochs 2 --steps-per-epoch 3 "
          "--batch-size 8 --out " +
          task,
      dir.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const auto written = nlohmann::json::parse(*read_text_file(task));
  EXPECT_EQ(written["gradient_groups"], 4);
  EXPECT_EQ(written["optimizer"]["ema_decay"], 0.99);
  EXPECT_FALSE(written["optimizer"]["no_decay"].empty());
  ASSERT_NO_FATAL_FAILURE(train_under_every_setting(dir, task, 3));
  const std::vector<Setting> all = settings();
  const auto roots = committed_roots(dir / ("w-" + all.front().name()) / "commitments.log");
  auto ranks = run_command(veritrain_binary() + " train --task " + task + " --workdir " +
                               (dir / "ranks").string() +
                               " --nproc 2 --rank-timeout 30 --checkpoint-activations",
                           dir.path());
  ASSERT_EQ(ranks.exit_code, 0) << ranks.err;
  EXPECT_EQ(committed_roots(dir / "ranks" / "commitments.log"), roots) << "2 ranks";
  const Setting& other = all.back();
  auto v = run_command(other.env() + veritrain_binary() + " verify --task " + task + " --workdir " +
                           (dir / "ranks").string() +
                           " --check-probability 1 --jobs 2 --checkpoint-activations --threads " +
                           std::to_string(other.threads) + " --report " + (dir / "report").string(),
                       dir.path());
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

// The state a workdir committed for `epoch`, as canonical safetensors.
fs::path extract(const testing::ScratchDir& dir, const fs::path& wd, int epoch,
                 const std::string& name) {
  fs::path out = dir / name;
  auto r = run_command(veritrain_binary() + " inspect " + wd.string() + " --epoch " +
                           std::to_string(epoch) + " --out " + out.string(),
                       dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

bool same_file(const fs::path& a, const fs::path& b) {
  auto x = read_file(a), y = read_file(b);
  return x.ok() && y.ok() && *x == *y;
}

class PortableReference : public ::testing::TestWithParam<Config> {};

// Epoch 0 from the seed, and epochs 1 -> 2 with gradient groups on: the reference's bytes are the
// committed ones.
TEST_P(PortableReference, NumpyAloneReplaysEveryEpochBitForBit) {
  if (!testing::have_python_modules("numpy")) GTEST_SKIP() << "python3-numpy not installed";
  testing::ScratchDir dir;
  const std::string task = write_task(dir, GetParam(), "--gradient-groups 2");
  const fs::path wd = dir / "w";
  auto r = run_command(veritrain_binary() + " train --task " + task + " --workdir " + wd.string(),
                       dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path e0 = extract(dir, wd, 0, "e0"), e1 = extract(dir, wd, 1, "e1"),
                 e2 = extract(dir, wd, 2, "e2");
  auto ref = run_command(kPython + " " + script("portable_ref.py") + " --init " + task + " " +
                             e0.string() + " " + (dir / "r0").string() + " " + task + " " +
                             e1.string() + " " + (dir / "r2").string(),
                         dir.path());
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  EXPECT_TRUE(same_file(e0, dir / "r0")) << "epoch 0 from the seed";
  EXPECT_TRUE(same_file(e2, dir / "r2")) << "epoch 2 from epoch 1";
}

INSTANTIATE_TEST_SUITE_P(Zoo, PortableReference, ::testing::ValuesIn(kConfigs),
                         [](const auto& info) { return std::string(info.param.name); });

// The comparison can fail: a reference whose matrix products run their chains from the last k
// down lands elsewhere.
TEST(PortableReferenceControl, AnotherSummationOrderDisagrees) {
  if (!testing::have_python_modules("numpy")) GTEST_SKIP() << "python3-numpy not installed";
  testing::ScratchDir dir;
  const fs::path copy = dir / "changed";
  fs::create_directories(copy);
  std::string text = *read_text_file(script("portable_ref.py"));
  const std::string from = "for k in range(a.shape[-1]):";
  const auto at = text.find(from);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, from.size(), "for k in reversed(range(a.shape[-1])):");
  ASSERT_TRUE(write_file_atomic(copy / "portable_ref.py", text).ok());
  fs::copy_file(script("ref_common.py"), copy / "ref_common.py");
  const std::string task = write_task(dir, kConfigs[0], "", 64);
  const fs::path wd = dir / "w";
  ASSERT_EQ(run_command(veritrain_binary() + " train --task " + task + " --workdir " + wd.string(),
                        dir.path())
                .exit_code,
            0);
  const fs::path e1 = extract(dir, wd, 1, "e1"), e2 = extract(dir, wd, 2, "e2");
  auto ref = run_command(kPython + " " + (copy / "portable_ref.py").string() + " " + task + " " +
                             e1.string() + " " + (dir / "r2").string(),
                         dir.path());
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  EXPECT_FALSE(same_file(e2, dir / "r2"));
}

// What portable arithmetic does not cover is refused before anything is committed, with why.
// A requestor's own TorchScript module: convolutions (one 1×1 of stride 2), batch norm, relu
// through F.relu's inplace branch, channel dropout (Dropout2d: aten::feature_dropout), a residual
// add, adaptive pooling, dropout and a linear head; and one whose forward runs operators without
// portable kernels.
const char* kScriptModules = R"PY(
import sys, torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(2, 8, 3, padding=1, bias=False); s.b1 = nn.BatchNorm2d(8)
        s.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False); s.b2 = nn.BatchNorm2d(16)
        s.short = nn.Conv2d(8, 16, 1, stride=2)
        s.fc = nn.Linear(16, 4); s.drop = nn.Dropout(0.2); s.pool = nn.AdaptiveAvgPool2d(1)
        s.channels = nn.Dropout2d(0.25)
    def forward(s, x):
        y = s.channels(F.relu(s.b1(s.c1(x.float().view(-1, 2, 4, 4)))))
        z = F.relu(s.b2(s.c2(y)) + s.short(y))
        return s.fc(s.drop(s.pool(z).flatten(1)))
class Squash(nn.Module):
    def __init__(s):
        super().__init__(); s.fc = nn.Linear(32, 4)
    def forward(s, x):
        return torch.cumprod(s.fc(x), 1) * torch.pow(s.fc(x).abs(), s.fc(x))
torch.jit.script(Net()).save(sys.argv[1] + "/net.pt")
torch.jit.script(Squash()).save(sys.argv[1] + "/squash.pt")
)PY";

TEST(PortableTorchScript, ItsOperatorsRunOnPortableKernelsAlikeEverywhere) {
  if (!testing::have_python_modules("torch")) GTEST_SKIP() << "python3-torch not installed";
  testing::ScratchDir dir;
  const std::string in = "cd '" + dir.path().string() + "' && ";  // relative files are dir's
  ASSERT_TRUE(write_file_atomic(dir / "modules.py", std::string(kScriptModules)).ok());
  auto made = run_command(in + kPython + " modules.py " + dir.path().string(), dir.path());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string flags =
      " --model torchscript --model-file net.pt --epochs 2 --steps-per-epoch 3 --batch-size 8";
  for (const char* determinism : {"portable", "exact"}) {
    std::string command = in + veritrain_binary() + " task init --determinism ";
    command += std::string(determinism) + flags + " --out " + determinism + ".json";
    auto init = run_command(command, dir.path());
    ASSERT_EQ(init.exit_code, 0) << init.err;
  }
  const std::vector<Setting> all = settings();
  ASSERT_NO_FATAL_FAILURE(train_under_every_setting(dir, (dir / "portable.json").string(), 3));
  const Setting& first = all.front();
  const Setting& last = all.back();
  auto v = run_command(in + last.env() + veritrain_binary() +
                           " verify --task portable.json --workdir w-" + first.name() +
                           " --check-probability 1 --jobs 1 --report report",
                       dir.path());
  EXPECT_EQ(v.exit_code, 0) << first.name() << " verified at " << last.name() << ": " << v.out
                            << v.err;
  // The control: LibTorch's own kernels (exact mode) commit other bits at another CPU level.
  std::vector<std::vector<std::string>> exact;
  for (const Setting& s : {first, last}) {
    const fs::path wd = dir / ("exact-" + s.name());
    auto r = run_command(
        in + s.env() + veritrain_binary() + " train --task exact.json --workdir " + wd.string(),
        dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    exact.push_back(committed_roots(wd / "commitments.log"));
  }
  EXPECT_NE(exact[0].back(), exact[1].back())
      << "exact mode at " << first.name() << " and " << last.name();
  // A module whose forward runs operators without portable kernels: refused, each named, before
  // any task is written.
  auto refused = run_command(in + veritrain_binary() +
                                 " task init --determinism portable --model torchscript "
                                 "--model-file squash.pt --out squash.json",
                             dir.path());
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("aten::cumprod"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("aten::pow.Tensor_Tensor"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(dir / "squash.json"));
  // Unasked, the same module gets exact mode, and task init says why.
  auto fallback = run_command(in + veritrain_binary() +
                                  " task init --model torchscript --model-file squash.pt --out " +
                                  "squash.json",
                              dir.path());
  ASSERT_EQ(fallback.exit_code, 0) << fallback.err;
  EXPECT_NE(fallback.err.find("determinism exact"), std::string::npos) << fallback.err;
  EXPECT_NE(fallback.err.find("aten::cumprod"), std::string::npos) << fallback.err;
  auto written = nlohmann::json::parse(*read_text_file(dir / "squash.json"));
  EXPECT_EQ(written["determinism"], "exact");
}

TEST(PortableDefault, TaskInitChoosesPortableOnCpusInFp32AndExactWhereItDoesNotReach) {
  testing::ScratchDir dir;
  struct Case {
    const char* flags;
    const char* determinism;
  };
  for (const Case& c :
       {Case{"--model cnn", "portable"}, Case{"--model gpt --threads 4", "portable"},
        Case{"--model mlp --precision bf16", "exact"}, Case{"--model mlp --device cuda", "exact"},
        Case{"--model mlp --pin-environment", "exact"},
        Case{"--model mlp --determinism tolerance", "tolerance"}}) {
    const fs::path out = dir / "task.json";
    auto init = run_command(veritrain_binary() + " task init " + c.flags + " --out " + out.string(),
                            dir.path());
    ASSERT_EQ(init.exit_code, 0) << c.flags << ": " << init.err;
    auto task = nlohmann::json::parse(*read_text_file(out));
    EXPECT_EQ(task["determinism"], c.determinism) << c.flags;
  }
}

TEST(PortableRefusals, CudaAndOtherPrecisionsAreRefusedNamingTheField) {
  testing::ScratchDir dir;
  struct Refusal {
    const char* flags;
    const char* message;
  };
  for (const Refusal& r : {Refusal{"--model mlp --device cuda", "device: portable arithmetic"},
                           Refusal{"--model mlp --precision bf16", "precision: portable"}}) {
    auto init = run_command(veritrain_binary() + " task init --determinism portable " + r.flags,
                            dir.path());
    EXPECT_EQ(init.exit_code, 2) << r.flags;
    EXPECT_NE(init.err.find(r.message), std::string::npos) << r.flags << ": " << init.err;
  }
  // train's --threads is the provider's choice only where bits do not depend on it.
  auto init = run_command(veritrain_binary() +
                              " task init --determinism exact --model mlp --epochs 1 --out " +
                              (dir / "exact.json").string(),
                          dir.path());
  ASSERT_EQ(init.exit_code, 0);
  auto r = run_command(veritrain_binary() + " train --task " + (dir / "exact.json").string() +
                           " --workdir " + (dir / "w").string() + " --threads 2",
                       dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--threads is for portable and tolerance tasks"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace vt
