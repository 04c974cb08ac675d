// The command line for people and scripts (docs/cli.md): --json anywhere, `ok` and `kind` in every
// JSON result, JSON usage errors, did-you-mean, environment variables, the light executable,
// `plan` without a GPU, train's certificate, metrics and health.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "tests/test_util.h"

namespace vt {
namespace {
namespace fs = std::filesystem;
using testing::run_command;
using testing::veritrain_binary;

nlohmann::json parse_json(const std::string& text) {
  return nlohmann::json::parse(text, nullptr, false);
}

std::string small_task(const testing::ScratchDir& dir, const std::string& extra = "") {
  std::string task = (dir / "task.json").string();
  auto r =
      run_command(veritrain_binary() + " task init --model mlp --epochs 2 --steps-per-epoch 3 " +
                      extra + " --out " + task,
                  dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return task;
}

TEST(CliJson, AcceptedAfterTheCommandWithOkAndKind) {
  testing::ScratchDir dir;
  const std::string task = small_task(dir);
  auto r = run_command(veritrain_binary() + " task show " + task + " --json", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = parse_json(r.out);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["kind"], "task show");
  EXPECT_EQ(j["task_id"].get<std::string>().size(), 64u);

  auto init = run_command(veritrain_binary() + " task init --model mlp --option hidden=8 --json",
                          dir.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  auto ij = parse_json(init.out);
  ASSERT_TRUE(ij.is_object()) << init.out;
  EXPECT_EQ(ij["kind"], "task init");
  EXPECT_EQ(ij["task_id"].get<std::string>().size(), 64u);
  EXPECT_EQ(ij["task"]["model"]["options"]["hidden"], 8);
}

TEST(CliJson, UsageErrorsAreJsonWithAHint) {
  testing::ScratchDir dir;
  auto missing = run_command(veritrain_binary() + " keygen --json", dir.path());
  EXPECT_EQ(missing.exit_code, 2);
  auto j = parse_json(missing.out);
  ASSERT_TRUE(j.is_object()) << missing.out;
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["kind"], "error");
  EXPECT_EQ(j["exit_code"], 2);
  EXPECT_NE(j["error"].get<std::string>().find("--out"), std::string::npos);

  auto typo = run_command(veritrain_binary() + " task shwo task.json", dir.path());
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("did you mean 'veritrain task show'?"), std::string::npos) << typo.err;
  auto heavy_typo = run_command(veritrain_binary() + " --json verfy", dir.path());
  EXPECT_EQ(heavy_typo.exit_code, 2);
  EXPECT_NE(parse_json(heavy_typo.out)["error"].get<std::string>().find(
                "did you mean 'veritrain verify'?"),
            std::string::npos)
      << heavy_typo.out;
  auto flag_typo = run_command(veritrain_binary() + " inspect --jsn x", dir.path());
  EXPECT_EQ(flag_typo.exit_code, 2);
  EXPECT_NE(flag_typo.err.find("did you mean --json?"), std::string::npos) << flag_typo.err;

  // The hint names the word typed wrong and its fix, once; CLI11's complaint that a mistyped
  // flag left a required one unset, or its list of unexpected words, does not hide it.
  auto taks = run_command(veritrain_binary() + " train --taks task.json", dir.path());
  EXPECT_EQ(taks.exit_code, 2);
  EXPECT_NE(taks.err.find("veritrain: unknown option --taks of 'veritrain train'; did you mean "
                          "--task?\n"),
            std::string::npos)
      << taks.err;
  EXPECT_EQ(taks.err.find("required"), std::string::npos) << taks.err;
  auto trian = run_command(veritrain_binary() + " trian --task task.json", dir.path());
  EXPECT_EQ(trian.exit_code, 2);
  EXPECT_NE(trian.err.find("veritrain: 'trian' is not a command of 'veritrain'; did you mean "
                           "'veritrain train'?\n"),
            std::string::npos)
      << trian.err;
  EXPECT_EQ(trian.err.find("not expected"), std::string::npos) << trian.err;
}

// `veritrain` itself must not load LibTorch: that is what makes these commands start at once.
// The one catch at the command edge (cli/app.cpp): an allocation that fails is this machine's
// want of memory, exit 3, with a message naming what was being read (JSON under --json), never
// std::terminate. A 300 MB sparse file read whole by `inspect` under a 200 MB address-space
// limit makes the allocation fail for real.
TEST(CliEdge, OutOfMemoryIsExitThreeNamingWhatWasRead) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: ulimit -v cannot apply";
#endif
  testing::ScratchDir dir;
  const fs::path big = dir / "big.bin";
  ASSERT_EQ(run_command("truncate -s 300M " + big.string(), dir.path()).exit_code, 0);
  auto r = run_command(
      "ulimit -v 200000 && " + veritrain_binary() + " --json inspect " + big.string(), dir.path());
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_NE(j["error"].get<std::string>().find("out of memory while reading " + big.string()),
            std::string::npos)
      << r.out;
}

TEST(CliLight, LinksNoLibtorchAndForwardsTheRest) {
  testing::ScratchDir dir;
  if (!testing::have_program("readelf")) GTEST_SKIP() << "no readelf";
  auto needed = run_command("readelf -d " + veritrain_binary(), dir.path());
  ASSERT_EQ(needed.exit_code, 0) << needed.err;
  ASSERT_NE(needed.out.find("(NEEDED)"), std::string::npos) << needed.out;
  EXPECT_EQ(needed.out.find("torch"), std::string::npos) << needed.out;
  EXPECT_EQ(needed.out.find("c10"), std::string::npos) << needed.out;
  auto version = run_command(veritrain_binary() + " --version", dir.path());  // in veritrain-torch
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find("libtorch "), std::string::npos);
  auto gone = run_command("VERITRAIN_TORCH=" + (dir / "nothing").string() + " " +
                              veritrain_binary() + " --json estimate --task x",
                          dir.path());
  EXPECT_EQ(gone.exit_code, 3);
  EXPECT_NE(gone.err.find("needs LibTorch"), std::string::npos) << gone.err;
  EXPECT_EQ(parse_json(gone.out)["ok"], false) << gone.out;
  // `verdict check` is one of the light commands: it answers without veritrain-torch.
  ASSERT_TRUE(vt::write_file_atomic(dir / "verdict.json", "{}").ok());
  auto verdict =
      run_command("VERITRAIN_TORCH=" + (dir / "nothing").string() + " " + veritrain_binary() +
                      " verdict check " + (dir / "verdict.json").string(),
                  dir.path());
  EXPECT_EQ(verdict.exit_code, 2) << verdict.err;
  EXPECT_EQ(verdict.err.find("needs LibTorch"), std::string::npos) << verdict.err;

  // --help of every command answers without veritrain-torch (it used to load LibTorch), with the
  // very text veritrain-torch prints, and no path of the machine veritrain was built on.
  const std::string torch_program =
      (std::filesystem::path(veritrain_binary()).parent_path() / "veritrain-torch").string();
  for (const std::string command : {"verify", "train", "audit", "task init", "task check",
                                    "estimate", "export", "plan", "task", "task show", "inspect"}) {
    auto help = run_command("VERITRAIN_TORCH=" + (dir / "nothing").string() + " " +
                                veritrain_binary() + " " + command + " --help",
                            dir.path());
    EXPECT_EQ(help.exit_code, 0) << command << ": " << help.err;
    EXPECT_NE(help.out.find("Usage: veritrain " + command), std::string::npos)
        << command << ": " << help.out;
    EXPECT_EQ(help.out.find(VT_SOURCE_DIR), std::string::npos) << command << ": " << help.out;
    if (command == "task" || command == "task show" || command == "inspect") continue;
    auto torch = run_command(torch_program + " " + command + " --help", dir.path());
    EXPECT_EQ(help.out, torch.out) << command;
  }
}

// `make demo`'s command: a provider process inherits the listening socket (serve --listen fd:3),
// the verifier connects at once and judges every epoch online.
TEST(CliDemo, TrainsServesAndVerifiesOnLoopback) {
  testing::ScratchDir dir;
  auto r = run_command(
      veritrain_binary() + " --json demo --epochs 2 --out " + (dir / "out").string(), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto j = parse_json(r.out);
  EXPECT_EQ(j["ok"], true) << r.out;
  EXPECT_EQ(j["provider"]["pinned"], true) << r.out;
  EXPECT_TRUE(fs::exists(dir / "out/report/verdict.json"));
  EXPECT_TRUE(fs::exists(dir / "out/report/report.html"));
  EXPECT_NE(r.err.find("serving on 127.0.0.1:"), std::string::npos) << r.err;
  auto check = run_command(
      veritrain_binary() + " verdict check " + (dir / "out/report/verdict.json").string(),
      dir.path());
  EXPECT_EQ(check.exit_code, 0) << check.err;
}

TEST(CliPlan, CostNeedsNoMeasurementAndACudaTaskPlansWithoutAGpu) {
  testing::ScratchDir dir;
  const std::string task = small_task(dir, "--device cuda");
  auto r = run_command(
      veritrain_binary() + " plan --task " + task + " --cost 10 --reward 100 --penalty 50 --json",
      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = parse_json(r.out);
  EXPECT_EQ(j["kind"], "plan");
  EXPECT_EQ(j["per_check_measured"], false);
  EXPECT_EQ(j["economics"]["honest_cost"], 10.0);
  auto cuda = run_command(veritrain_binary() + " --json --version", dir.path());
  if (parse_json(cuda.out)["cuda_available"] == true) GTEST_SKIP() << "this machine has a GPU";
  auto measured = run_command(veritrain_binary() + " plan --task " + task + " --json", dir.path());
  ASSERT_EQ(measured.exit_code, 0) << measured.err;
  EXPECT_TRUE(parse_json(measured.out)["per_check"].is_null()) << measured.out;
  EXPECT_NE(measured.err.find("no CUDA device"), std::string::npos) << measured.err;
}

// One trained workdir for the tests that read one: inspect, environment variables.
class CliWorkdir : public ::testing::Test {
 protected:
  void SetUp() override {
    task_ = small_task(dir_);
    auto r = run_command(
        veritrain_binary() + " train --task " + task_ + " --workdir " + (dir_ / "run").string(),
        dir_.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Without --json, stdout holds the human summary and nothing else.
    EXPECT_EQ(r.out.find('{'), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("trained 2 epochs"), std::string::npos) << r.out;
  }
  testing::ScratchDir dir_;
  std::string task_;
};

TEST_F(CliWorkdir, InspectPrintsTextUnlessJson) {
  const std::string log = (dir_ / "run/commitments.log").string();
  auto human = run_command(veritrain_binary() + " inspect " + log, dir_.path());
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("commitment log, 3 records"), std::string::npos) << human.out;
  EXPECT_EQ(human.out.find('{'), std::string::npos) << human.out;
  auto j =
      parse_json(run_command(veritrain_binary() + " inspect " + log + " --json", dir_.path()).out);
  EXPECT_EQ(j["kind"], "commitment log");
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["records"].size(), 3u);
  auto task = run_command(veritrain_binary() + " inspect " + task_, dir_.path());
  EXPECT_NE(task.out.find("task, task_id "), std::string::npos) << task.out;
  auto verified = parse_json(
      run_command(veritrain_binary() + " --json log verify --workdir " + (dir_ / "run").string(),
                  dir_.path())
          .out);
  EXPECT_EQ(verified["ok"], true);
  EXPECT_EQ(verified["kind"], "log verify");
}

TEST_F(CliWorkdir, ProviderKeyFromTheEnvironment) {
  const std::string run = (dir_ / "run").string();
  const std::string other(64, 'a');
  auto pinned_wrong = run_command(
      "VERITRAIN_PROVIDER_KEY=" + other + " " + veritrain_binary() + " log verify --workdir " + run,
      dir_.path());
  EXPECT_EQ(pinned_wrong.exit_code, 1) << pinned_wrong.err;
  EXPECT_NE(pinned_wrong.err.find(other), std::string::npos) << pinned_wrong.err;
  auto pinned_right = run_command("VERITRAIN_PROVIDER_KEY=" + run + "/keys/signing.pub.pem " +
                                      veritrain_binary() + " --json log verify --workdir " + run,
                                  dir_.path());
  EXPECT_EQ(pinned_right.exit_code, 0) << pinned_right.err;
  EXPECT_EQ(parse_json(pinned_right.out)["signer_pinned"], true);
  auto flag_wins = run_command("VERITRAIN_PROVIDER_KEY=" + other + " " + veritrain_binary() +
                                   " log verify --workdir " + run + " --provider-key " + run +
                                   "/keys/signing.pub.pem",
                               dir_.path());
  EXPECT_EQ(flag_wins.exit_code, 0) << flag_wins.err;
}

std::string http_get(std::uint16_t port, const std::string& path) {
  const std::string file =
      (fs::temp_directory_path() / ("vt-http-" + std::to_string(::getpid()))).string();
  const int rc = std::system(
      ("curl -sf http://127.0.0.1:" + std::to_string(port) + path + " -o " + file).c_str());
  auto body = read_text_file(file);
  fs::remove(file);
  return rc == 0 && body.ok() ? *body : "";
}

TEST(CliTrain, ServesKeygensCertificateAndExportsTrainingMetrics) {
  testing::ScratchDir dir;
  if (!testing::have_program("curl")) GTEST_SKIP() << "no curl";
  const std::string task = small_task(dir);
  auto keygen = run_command(veritrain_binary() + " --json keygen --out " + (dir / "keys").string(),
                            dir.path());
  ASSERT_EQ(keygen.exit_code, 0) << keygen.err;
  const std::string pin = parse_json(keygen.out)["tls_certificate_sha256"];
  const fs::path log = dir / "train.log";
  testing::Background train(
      {veritrain_binary(), "train", "--task", task, "--workdir", (dir / "run").string(), "--key",
       (dir / "keys").string(), "--serve", "127.0.0.1:0", "--metrics", "127.0.0.1:0"},
      log);
  std::uint16_t port = 0;
  std::string text;
  for (int i = 0; i < 600 && port == 0 && train.running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto current = read_text_file(log);
    text = current.ok() ? *current : "";
    std::smatch m;
    if (std::regex_search(text, m,
                          std::regex("metrics at http://127\\.0\\.0\\.1:([0-9]+)/metrics"))) {
      port = static_cast<std::uint16_t>(std::stoi(m[1]));
    }
  }
  ASSERT_NE(port, 0) << "no bound metrics port in the log:\n" << text;
  EXPECT_NE(text.find("certificate pin (verify --pin): " + pin), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(dir / "run/keys")) << "a second identity was made in the workdir";
  EXPECT_EQ(http_get(port, "/healthz"), "ok\n");
  // Training is short: wait for both epochs' commitments in the gauges.
  std::string metrics;
  for (int i = 0; i < 600; ++i) {
    metrics = http_get(port, "/metrics");
    if (metrics.find("veritrain_train_epochs_committed 3") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(metrics.find("veritrain_train_epochs_committed 3"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("veritrain_train_epoch 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("veritrain_train_step 3"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("veritrain_train_loss "), std::string::npos);
  EXPECT_NE(metrics.find("veritrain_train_commit_lag_seconds "), std::string::npos);
  EXPECT_NE(metrics.find("veritrain_requests_total"),
            std::string::npos);  // the server's counters too
}

}  // namespace
}  // namespace vt
