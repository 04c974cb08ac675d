// The committed arithmetic environment through the `veritrain` binary (docs/environment.md):
// one machine poses as others with ATEN_CPU_CAPABILITY. A verifier that can reach the
// provider's level replays there and judges; one that cannot ends inconclusive (exit 5) and
// accuses no one; what the provider commits about its environment is held to the task's pin,
// to one environment per exact run, and to its signature.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "common/safetensors.h"
#include "protocol/keys.h"
#include "tests/adversary/forger.h"
#include "tests/cli/model_fixtures.h"
#include "tests/test_util.h"

namespace vt::adversary {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::veritrain_binary;

bool cpu_runs(const char* level) {
  __builtin_cpu_init();
  const bool fma = __builtin_cpu_supports("fma");
  if (std::string(level) == "avx2") return fma && __builtin_cpu_supports("avx2");
  return fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

struct Workdir {
  testing::ScratchDir dir;
  fs::path task = dir / "task.json";
  fs::path wd = dir / "wd";

  explicit Workdir(const std::string& model, const std::string& extra = "") {
    auto init = run_command(veritrain_binary() + " task init --determinism exact --model " + model +
                                " --epochs 2 --steps-per-epoch 2 --batch-size 8 " + extra +
                                " --out " + task.string(),
                            dir.path());
    EXPECT_EQ(init.exit_code, 0) << init.err;
  }
  // `level` empty: no ATEN_CPU_CAPABILITY at all.
  static std::string at(const std::string& level) {  // the environment of one command
    return level.empty() ? std::string("env -u ATEN_CPU_CAPABILITY ")
                         : "env ATEN_CPU_CAPABILITY=" + level + " ";
  }
  testing::CommandResult train(const std::string& level, const std::string& env = "") const {
    return run_command(at(level) + env + veritrain_binary() + " train --task " + task.string() +
                           " --workdir " + wd.string(),
                       dir.path());
  }
  testing::CommandResult verify(const std::string& level, const std::string& report) const {
    return run_command(at(level) + veritrain_binary() + " --json verify --task " + task.string() +
                           " --workdir " + wd.string() + " --provider-key " +
                           (wd / "keys" / "signing.pub.pem").string() +
                           " --check-probability 1 --jobs 1 --report " + (dir / report).string(),
                       dir.path());
  }
  nlohmann::json verdict(const std::string& report) const {
    auto text = read_text_file(dir / report / "verdict.json");
    EXPECT_TRUE(text.ok());
    return nlohmann::json::parse(*text)["verdict"];
  }
  Environment committed(std::uint64_t epoch) const {
    auto log = read_log(wd / "commitments.log");
    EXPECT_TRUE(log.ok());
    return log->records.at(epoch).record.environment.value_or(Environment{});
  }
  // Rewrites the log with `edit`, re-signed with the provider's own key: a provider lying in
  // its own log.
  void reforge(const std::function<void(std::uint64_t, CommitRecord&)>& edit) const {
    auto key = SigningKey::load(wd / "keys" / "signing.key.pem");
    ASSERT_TRUE(key.ok()) << key.error().message;
    auto forged = reforge_workdir(wd, *key, [&](std::uint64_t e, CommitRecord& r, Bytes&) {
      edit(e, r);
      return Status{};
    });
    ASSERT_TRUE(forged.ok()) << forged.error().message;
  }
};

class EnvironmentCli : public ::testing::TestWithParam<const char*> {};

// Measured, not assumed: the verifier adopts the provider's lower ATen level (and oneDNN ISA)
// before any kernel runs, and its replays reach the committed roots.
TEST_P(EnvironmentCli, AProviderAtALowerLevelIsReplayedThereAndAccepted) {
  if (!cpu_runs("avx2")) GTEST_SKIP() << "this CPU has no AVX2";
  Workdir run(GetParam());
  auto trained = run.train("avx2");
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_EQ(run.committed(0).at("cpu_capability"), "avx2");
  auto r = run.verify("", "report");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json v = run.verdict("report");
  EXPECT_EQ(v["result"], "accepted");
  EXPECT_TRUE(v["environment"]["unmatched"].empty());
  if (cpu_runs("avx512")) {
    EXPECT_NE(v["notes"].dump().find(
                  "replayed at ATen CPU level avx2, the level the provider committed (this CPU "
                  "supports up to avx512)"),
              std::string::npos)
        << v["notes"].dump();
  }
}

// The verifier's CPU (posed with ATEN_CPU_CAPABILITY) lacks the provider's level: no replay,
// exit 5, and nothing in the verdict holds anything against the provider.
TEST_P(EnvironmentCli, AVerifierBelowTheProvidersLevelIsInconclusiveNeverRejecting) {
  if (!cpu_runs("avx512")) GTEST_SKIP() << "this CPU has no AVX-512 to train at";
  Workdir run(GetParam());
  auto trained = run.train("avx512");
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  for (const char* level : {"avx2", "default"}) {
    const std::string report = std::string("report-") + level;
    auto r = run.verify(level, report);
    EXPECT_EQ(r.exit_code, 5) << level << ": " << r.out << r.err;
    const nlohmann::json v = run.verdict(report);
    EXPECT_EQ(v["result"], "inconclusive") << level;
    EXPECT_TRUE(v["reasons"].empty()) << v["reasons"].dump();
    EXPECT_TRUE(v["checks"].empty()) << "nothing may be replayed";
    ASSERT_FALSE(v["environment"]["unmatched"].empty());
    EXPECT_EQ(v["environment"]["unmatched"][0]["field"], "cpu_capability");
    EXPECT_EQ(v["environment"]["unmatched"][0]["committed"], "avx512");
    EXPECT_NE(v["environment"]["would_judge"].get<std::string>().find("avx512"), std::string::npos);
    EXPECT_TRUE(v["log_failures"].empty()) << v["log_failures"].dump();
    // What people read says so too, and accuses no one.
    auto text = run_command(Workdir::at(level) + veritrain_binary() + " verify --task " +
                                run.task.string() + " --workdir " + run.wd.string() +
                                " --check-probability 1 --report " +
                                (run.dir / ("human-" + std::string(level))).string(),
                            run.dir.path());
    EXPECT_EQ(text.exit_code, 5);
    EXPECT_NE(text.out.find("INCONCLUSIVE"), std::string::npos) << text.out;
    for (const char* accusation : {"REJECTED", "reason:", "forged", "cheat", "FAILED"})
      EXPECT_EQ(text.out.find(accusation), std::string::npos) << accusation << " in " << text.out;
    auto html = read_text_file(run.dir / report / "report.html");
    ASSERT_TRUE(html.ok());
    EXPECT_NE(html->find("INCONCLUSIVE"), std::string::npos);
    EXPECT_NE(html->find("Arithmetic environment"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, EnvironmentCli, ::testing::Values("mlp", "cnn", "gpt"),
                         testing::ValueName());

TEST(EnvironmentCliForged, ACheatAtTheProvidersLevelIsStillRejected) {
  if (!cpu_runs("avx2")) GTEST_SKIP() << "this CPU has no AVX2";
  Workdir run("mlp");
  ASSERT_EQ(run.train("avx2").exit_code, 0);
  auto key = SigningKey::load(run.wd / "keys" / "signing.key.pem");
  ASSERT_TRUE(key.ok());
  auto task = load_task(run.task.string());
  ASSERT_TRUE(task.ok());
  // Epoch 2 committed as a state that training did not produce, honestly fingerprinted.
  auto forged = reforge_workdir(run.wd, *key, [&](std::uint64_t e, CommitRecord& r, Bytes& state) {
    if (e != 2) return Status{};
    auto shifted = shift_tensor(state, "param/body.0.weight", 0.5, 1e-3f);
    if (!shifted) return Status(shifted.error());
    state = std::move(*shifted);
    return commit_state(*task, e, state, r);
  });
  ASSERT_TRUE(forged.ok()) << forged.error().message;
  auto r = run.verify("", "report");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(run.verdict("report")["result"], "rejected");
}

TEST(EnvironmentCliForged, AnEnvironmentOutsideTheTasksPinIsRejectedNamingTheField) {
  if (!cpu_runs("avx2")) GTEST_SKIP() << "this CPU has no AVX2";
  Workdir run("mlp");
  // The requestor pins avx2 (what its machine replays, say); the provider trains there...
  auto text = read_text_file(run.task);
  ASSERT_TRUE(text.ok());
  nlohmann::json t = nlohmann::json::parse(*text);
  t["environments"] = {{"cpu_capability", {"avx2"}}};
  ASSERT_TRUE(write_file_atomic(run.task, t.dump(2)).ok());
  if (cpu_runs("avx512")) {
    // ...and a provider that would train elsewhere is stopped before it commits anything.
    auto refused = run.train("avx512");
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_NE(refused.err.find("cpu_capability \"avx512\" is not among the values the task pins"),
              std::string::npos)
        << refused.err;
    EXPECT_FALSE(fs::exists(run.wd / "commitments.log"));
  }
  ASSERT_EQ(run.train("avx2").exit_code, 0);
  // A provider claiming an environment outside the pin in its signed log.
  run.reforge([](std::uint64_t e, CommitRecord& r) {
    if (e == 0) (*r.environment)["cpu_capability"] = "avx512";
  });
  auto r = run.verify("avx2", "report");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(run.verdict("report")["reasons"].dump().find(
                "epoch 0: the committed arithmetic environment is outside the task's pin: "
                "cpu_capability"),
            std::string::npos)
      << run.verdict("report")["reasons"].dump();
}

TEST(EnvironmentCliForged, AnEnvironmentThatChangesAtAResumeIsRejected) {
  if (!cpu_runs("avx2")) GTEST_SKIP() << "this CPU has no AVX2";
  Workdir run("mlp");
  ASSERT_EQ(run.train("avx2").exit_code, 0);
  Environment elsewhere = run.committed(0);
  elsewhere["cpu_capability"] = "default";
  run.reforge([&](std::uint64_t e, CommitRecord& r) {
    if (e == 2) r.environment = elsewhere;
  });
  auto r = run.verify("", "report");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(run.verdict("report")["reasons"].dump().find(
                "epoch 2: the arithmetic environment changed at a resume: cpu_capability"),
            std::string::npos)
      << run.verdict("report")["reasons"].dump();
}

// The provider's side of the same rule: a resume in another environment is refused before it
// commits anything, so an honest provider never writes such a log.
TEST(EnvironmentCliForged, AResumeInAnotherEnvironmentIsRefused) {
  if (!cpu_runs("avx512")) GTEST_SKIP() << "this CPU has no AVX-512";
  Workdir run("mlp");
  auto crashed = run.train("avx2", "VT_CRASH_AT=during_training:2 ");
  ASSERT_NE(crashed.exit_code, 0);
  auto resumed = run.train("avx512");
  EXPECT_EQ(resumed.exit_code, 2) << resumed.err;
  EXPECT_NE(resumed.err.find("cpu_capability avx2 (committed) vs avx512 (here)"), std::string::npos)
      << resumed.err;
  const auto before = read_log(run.wd / "commitments.log");
  ASSERT_TRUE(before.ok());
  const std::size_t first_resumed = before->records.size();
  EXPECT_EQ(run.train("avx2").exit_code, 0) << "resuming where it started works";
  // The first record the resumed run appended says where it ran; the next one says nothing.
  EXPECT_EQ(run.committed(first_resumed)["cpu_capability"], "avx2");
  if (first_resumed < 2) {
    EXPECT_TRUE(run.committed(first_resumed + 1).empty());
  }
}

// A TorchScript workdir trained before veritrain fixed TorchScript's executor commits no
// `script_executor`: its bits depended on how often the module had run, which no log records, so
// a replay's difference says nothing about the provider. Inconclusive, never rejected.
TEST(EnvironmentCliForged, ATorchScriptLogFromBeforeTheFixedExecutorIsInconclusive) {
  const fs::path fixtures = testing::model_fixtures();
  if (fixtures.empty()) GTEST_SKIP() << "python3-torch not installed";
  Workdir run("torchscript --model-file " + (fixtures / "ts_synthetic.pt").string());
  ASSERT_EQ(run.train("").exit_code, 0);
  EXPECT_EQ(run.committed(0)["script_executor"], "graph-executor-optimize-off");
  auto honest = run.verify("", "honest");
  EXPECT_EQ(honest.exit_code, 0) << honest.out << honest.err;
  run.reforge([](std::uint64_t e, CommitRecord& r) {
    if (e == 0) r.environment->erase("script_executor");
  });
  auto r = run.verify("", "report");
  EXPECT_EQ(r.exit_code, 5) << r.out << r.err;
  const nlohmann::json verdict = run.verdict("report");
  EXPECT_EQ(verdict["result"], "inconclusive");
  EXPECT_NE(verdict.dump().find("script_executor"), std::string::npos) << verdict.dump(1);
  EXPECT_NE(verdict.dump().find("how often the module had run"), std::string::npos)
      << verdict.dump(1);
}

// A workdir trained before veritrain repaired LibTorch's GELU gradient commits no
// `libtorch_repairs`: a GELU whose gradient arrived transposed then gave bits that no replay
// reproduces. A replay's difference says nothing about the provider: inconclusive.
TEST(EnvironmentCliForged, ALogFromBeforeTheLibTorchRepairsIsInconclusive) {
  Workdir run("mlp");
  ASSERT_EQ(run.train("").exit_code, 0);
  EXPECT_EQ(run.committed(0)["libtorch_repairs"], "gelu-backward-dense-grad");
  run.reforge([](std::uint64_t e, CommitRecord& r) {
    if (e == 0) r.environment->erase("libtorch_repairs");
  });
  auto r = run.verify("", "report");
  EXPECT_EQ(r.exit_code, 5) << r.out << r.err;
  const nlohmann::json verdict = run.verdict("report");
  EXPECT_EQ(verdict["result"], "inconclusive");
  EXPECT_NE(verdict.dump().find("commits no LibTorch repairs"), std::string::npos)
      << verdict.dump(1);
}

// What the provider says about its environment is signed: changing it without the provider's
// key breaks the record like any other change.
TEST(EnvironmentCliForged, AnEditedEnvironmentBreaksTheSignature) {
  Workdir run("mlp");
  ASSERT_EQ(run.train("").exit_code, 0);
  auto text = read_text_file(run.wd / "commitments.log");
  ASSERT_TRUE(text.ok());
  std::string log = *text;
  const auto at = log.find("\"cpu_capability\":\"");
  ASSERT_NE(at, std::string::npos);
  const auto value = at + std::string("\"cpu_capability\":\"").size();
  const auto end = log.find('"', value);
  log.replace(value, end - value, log.substr(value, end - value) == "default" ? "avx2" : "default");
  ASSERT_TRUE(write_file_atomic(run.wd / "commitments.log", log).ok());
  auto r = run.verify("", "report");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(run.verdict("report")["reasons"].dump().find("signature does not verify"),
            std::string::npos)
      << run.verdict("report")["reasons"].dump();
}

// Before anyone pays: an exact task that pins nothing is warned about, and --pin-environment
// writes what this machine replays, which `task check` then has nothing to warn about.
TEST(EnvironmentCliTask, ExactTasksWarnUntilPinnedAndThePinIsWhatThisMachineReplays) {
  Workdir run("mlp");
  const std::string warning = "the task pins no arithmetic environment";
  auto check = run_command(veritrain_binary() + " task check " + run.task.string(), run.dir.path());
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find(warning), std::string::npos) << check.out;
  auto plan = run_command(veritrain_binary() + " plan --task " + run.task.string() + " --cost 10",
                          run.dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find(warning), std::string::npos) << plan.out;

  const fs::path pinned = run.dir / "pinned.json";
  auto init =
      run_command(veritrain_binary() +
                      " task init --determinism exact --model mlp --epochs 2 --steps-per-epoch 2 "
                      "--batch-size 8 --pin-environment --out " +
                      pinned.string(),
                  run.dir.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  EXPECT_EQ(init.err.find(warning), std::string::npos) << init.err;
  auto task = load_task(pinned.string());
  ASSERT_TRUE(task.ok()) << task.error().message;
  ASSERT_TRUE(task->environments.count("cpu_capability"));
  const auto& levels = task->environments.at("cpu_capability");
  EXPECT_EQ(levels.front(), "default");
  if (cpu_runs("avx2")) {
    EXPECT_NE(std::find(levels.begin(), levels.end(), "avx2"), levels.end());
  }
  EXPECT_TRUE(task->environments.count("blas_sha256"));
  EXPECT_TRUE(task->environments.count("torch"));
  auto pinned_check =
      run_command(veritrain_binary() + " task check " + pinned.string(), run.dir.path());
  ASSERT_EQ(pinned_check.exit_code, 0) << pinned_check.err;
  EXPECT_EQ(pinned_check.out.find("warning"), std::string::npos) << pinned_check.out;
  // A pin is a condition of exact CPU tasks only.
  auto refused = run_command(
      veritrain_binary() + " task init --model mlp --determinism tolerance --pin-environment",
      run.dir.path());
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--pin-environment: only an exact-mode CPU task"), std::string::npos)
      << refused.err;
}

// A real exact CUDA workdir: `task init --model cnn --device cuda --determinism exact --epochs 3`
// trained on an NVIDIA H200 (LibTorch 2.11, CUDA 13.0) by scripts/gpu-check.sh. Its log commits
// gpu_name "unknown" (that veritrain did not yet find the driver's entry points); the private
// keys are left out.
class CudaWorkdir {
 public:
  testing::ScratchDir dir;
  fs::path task = dir / "task.json";
  fs::path wd = dir / "work";

  CudaWorkdir() {
    const fs::path archive =
        fs::path(VT_SOURCE_DIR) / "tests" / "adversary" / "data" / "h200_cnn_exact.tar.gz";
    auto r = run_command("tar -xzf " + archive.string() + " -C " + dir.path().string(), dir.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  testing::CommandResult verify(const std::string& report, const std::string& flags = "") const {
    return run_command(veritrain_binary() + " " + flags + " verify --task " + task.string() +
                           " --workdir " + wd.string() + " --provider-key " +
                           (wd / "keys" / "signing.pub.pem").string() + " --report " +
                           (dir / report).string(),
                       dir.path());
  }
  nlohmann::json verdict(const std::string& report) const {
    auto text = read_text_file(dir / report / "verdict.json");
    EXPECT_TRUE(text.ok());
    return nlohmann::json::parse(*text)["verdict"];
  }
};

bool cuda_here() {
  return run_command(veritrain_binary() + " --version", ".").out.find("cuda available") !=
         std::string::npos;
}

// A requestor without the provider's GPU checks all that needs no replay (signatures, chain,
// initial state's plans, the delivered final model) and ends inconclusive, naming the GPU that
// would judge; it used to stop with "CUDA is not available" (exit 2).
TEST(EnvironmentCuda, AnH200WorkdirVerifiedOnACpuOnlyMachineIsInconclusive) {
  if (cuda_here()) GTEST_SKIP() << "this machine has CUDA: it may replay the workdir";
  CudaWorkdir run;
  auto r = run.verify("report");
  EXPECT_EQ(r.exit_code, 5) << r.out << r.err;
  EXPECT_NE(r.out.find("INCONCLUSIVE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("challenged 0 of 3 epochs (no replays on this machine)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("compute_capability 9.0 committed, none here"), std::string::npos) << r.out;
  for (const char* accusation : {"REJECTED", "reason:", "forged", "cheat", "FAILED"})
    EXPECT_EQ(r.out.find(accusation), std::string::npos) << accusation << " in " << r.out;
  const nlohmann::json v = run.verdict("report");
  EXPECT_EQ(v["result"], "inconclusive");
  EXPECT_TRUE(v["reasons"].empty()) << v["reasons"].dump();
  EXPECT_TRUE(v["log_failures"].empty()) << v["log_failures"].dump();
  EXPECT_TRUE(v["checks"].empty()) << "nothing may be replayed";
  bool capability = false;
  for (const auto& d : v["environment"]["unmatched"])
    capability = capability || (d["field"] == "compute_capability" && d["committed"] == "9.0" &&
                                d["here"] == "none");
  EXPECT_TRUE(capability) << v["environment"].dump();
  EXPECT_NE(v["environment"]["would_judge"].get<std::string>().find(
                "a GPU (compute capability 9.0, 132 SMs) with CUDA 13.0"),
            std::string::npos)
      << v["environment"]["would_judge"];
}

// What needs no replay still binds the provider: a CUDA provider that withholds the final model
// is rejected by a CPU-only verifier too, naming the epoch.
TEST(EnvironmentCuda, AWithheldFinalModelIsRejectedEvenWithoutTheGpu) {
  if (cuda_here()) GTEST_SKIP() << "this machine has CUDA: it may replay the workdir";
  CudaWorkdir run;
  // Epoch 3's snapshot is stored as a delta on epoch 2's: without epoch 2 it cannot be rebuilt.
  ASSERT_TRUE(fs::remove(run.wd / "snapshots" /
                         "24c27124db5c71717bd57c8497ade6b50d5f53ce5408453f0ea3bf8a8f279764.vtc"));
  auto r = run.verify("report", "--json");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const nlohmann::json v = run.verdict("report");
  EXPECT_EQ(v["result"], "rejected");
  EXPECT_NE(v["reasons"].dump().find("epoch 3: the delivered final model"), std::string::npos)
      << v["reasons"].dump();
}

// The requestor's other commands on that workdir need no GPU either: the final weights export
// (a state read, not replayed), and the task checks on the CPU, saying so.
TEST(EnvironmentCuda, AnH200WorkdirExportsAndItsTaskChecksWithoutTheGpu) {
  if (cuda_here()) GTEST_SKIP() << "this machine has CUDA: these run on it";
  CudaWorkdir run;
  const fs::path exported = run.dir / "final.safetensors";
  auto e = run_command(veritrain_binary() + " export --workdir " + run.wd.string() +
                           " --epoch 3 --safetensors " + exported.string(),
                       run.dir.path());
  ASSERT_EQ(e.exit_code, 0) << e.out << e.err;
  auto bytes = read_file(exported);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  auto view = parse_safetensors(*bytes);
  ASSERT_TRUE(view.ok()) << view.error().message;
  EXPECT_NE(view->find("head.weight"), nullptr);

  auto check = run_command(veritrain_binary() + " task check " + run.task.string(), run.dir.path());
  ASSERT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("note: checked on the CPU: this machine has no CUDA"), std::string::npos)
      << check.out;
  EXPECT_NE(check.out.find("only on a GPU like the provider's"), std::string::npos) << check.out;
  EXPECT_EQ(check.out.find("--pin-environment"), std::string::npos) << check.out;
}

}  // namespace
}  // namespace vt::adversary
