// A provider that answers get_log with a log that never ends, against `veritrain verify` with a
// 3 GiB address-space limit (a verifier on a shared machine has limits): the verifier stops at
// the first record that cannot belong to the task and ends in a signed rejection naming it,
// within seconds and in bounded memory (docs/reliability.md, "A log is read within the task's
// bounds"). Each earlier hostile log keeps its regression test here or in
// tests/protocol/hostile_provider_test.cpp.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "protocol/log.h"
#include "tests/protocol/hostile_provider.h"
#include "tests/test_util.h"

namespace vt {
namespace {
namespace fs = std::filesystem;
using testing::run_command;
using testing::veritrain_binary;

constexpr rlim_t kAddressSpace = rlim_t{3} << 30;
// What the verifier may hold at its peak: LibTorch and the task's model (about 200 MiB here),
// with room to spare, and far below what reading the stream would take (it sends 4 MiB frames
// for as long as it is read). Under AddressSanitizer, whose shadow memory and quarantine
// add to every allocation (a Debug build's verifier peaks at about 630 MiB), twice that.
#if defined(__SANITIZE_ADDRESS__)
constexpr long kPeakKiB = 1024L * 1024;
#else
constexpr long kPeakKiB = 512L * 1024;
#endif

struct Outcome {
  int exit_code = -1;
  double seconds = 0;
  long peak_kib = 0;  // the verifier's maximum resident set
  std::string err;
};

// `veritrain verify` in a child with RLIMIT_AS set (not under AddressSanitizer, whose shadow
// memory needs more address space than any limit: the peak RSS still bounds it), its peak RSS
// from wait4.
Outcome verify_limited(const testing::ScratchDir& dir, const std::vector<std::string>& args) {
  const fs::path err = dir / "verify.stderr";
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer reserves terabytes of address space
    const rlimit limit{kAddressSpace, kAddressSpace};
    ::setrlimit(RLIMIT_AS, &limit);
#endif
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  Outcome o;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  o.peak_kib = usage.ru_maxrss;
  if (auto text = read_text_file(err); text.ok()) o.err = *text;
  return o;
}

class HostileLog : public ::testing::Test {
 protected:
  void SetUp() override {
    auto init = run_command(veritrain_binary() +
                                " task init --model mlp --epochs 4 --steps-per-epoch 3 "
                                "--batch-size 8 --data-option samples=64 --out " +
                                task_.string(),
                            dir_.path());
    ASSERT_EQ(init.exit_code, 0) << init.err;
    auto train = run_command(
        veritrain_binary() + " train --task " + task_.string() + " --workdir " + wd_.string(),
        dir_.path());
    ASSERT_EQ(train.exit_code, 0) << train.err;
    ASSERT_TRUE(write_file_atomic(token_, std::string_view("any token will do\n"), 0600).ok());
  }

  testing::HostileOptions options(testing::Hostility mode) const {
    testing::HostileOptions o;
    o.mode = mode;
    o.task = *read_file(task_);
    auto log = read_log(wd_ / "commitments.log");
    EXPECT_TRUE(log.ok());
    for (const SignedRecord& r : log->records) o.log_lines.push_back(encode_record(r));
    return o;
  }

  Outcome verify(const testing::HostileProvider& provider, const std::string& report) const {
    return verify_limited(
        dir_, {veritrain_binary(), "--log-level", "warn", "verify", "--task", task_.string(),
               "--provider", "127.0.0.1:" + std::to_string(provider.port()), "--insecure",
               "--token-file", token_.string(), "--check-probability", "1", "--jobs", "1",
               "--report", (dir_ / report).string()});
  }

  // The signed verdict's result and its log failures, one text.
  std::pair<std::string, std::string> verdict(const std::string& report) const {
    auto text = read_text_file(dir_ / report / "verdict.json");
    if (!text.ok()) return {"(no verdict)", text.error().message};
    const auto j = nlohmann::json::parse(*text);
    EXPECT_TRUE(j.contains("signature")) << *text;
    return {j["verdict"]["result"], j["verdict"]["log_failures"].dump()};
  }

  testing::ScratchDir dir_;
  fs::path task_ = dir_ / "task.json";
  fs::path wd_ = dir_ / "wd";
  fs::path token_ = dir_ / "token";
};

// The case that crashed the verifier with std::bad_alloc: fabricated records with consecutive
// epochs and bogus signatures, 4 MiB a frame, for ever. The first of them ends the read.
TEST_F(HostileLog, ForgedRecordsForEverEndAtTheFirstBadSignature) {
  testing::HostileOptions o = options(testing::Hostility::kForgedEndlessLog);
  o.forge_from = 1;
  testing::HostileProvider provider(o);
  const Outcome out = verify(provider, "report");
  EXPECT_EQ(out.exit_code, 1) << out.err;
  EXPECT_LT(out.seconds, 30.0);
  EXPECT_LT(out.peak_kib, kPeakKiB);
  const auto [result, failures] = verdict("report");
  EXPECT_EQ(result, "rejected");
  EXPECT_NE(failures.find("epoch 1 (line 2): signature does not verify"), std::string::npos)
      << failures;
  std::cerr << "forged from epoch 1: exit " << out.exit_code << " in " << out.seconds << " s, peak "
            << out.peak_kib / 1024 << " MiB\n";
}

// The same stream after the whole honest log: the first record past the task's last epoch ends
// it, whatever its signature.
TEST_F(HostileLog, RecordsPastTheTasksLastEpochEndTheRead) {
  testing::HostileOptions o = options(testing::Hostility::kForgedEndlessLog);
  o.forge_from = 5;  // epochs 0..4 are the real ones
  testing::HostileProvider provider(o);
  const Outcome out = verify(provider, "report");
  EXPECT_EQ(out.exit_code, 1) << out.err;
  EXPECT_LT(out.seconds, 30.0);
  EXPECT_LT(out.peak_kib, kPeakKiB);
  const auto [result, failures] = verdict("report");
  EXPECT_EQ(result, "rejected");
  EXPECT_NE(failures.find("epoch 5 (line 6): the log goes on past the 5 records the task allows"),
            std::string::npos)
      << failures;
}

// The earlier hostile logs, through the whole command: the last real record repeated for ever,
// and frames that promise more and carry nothing.
TEST_F(HostileLog, EarlierEndlessLogsStillEndInSignedRejections) {
  for (const auto mode : {testing::Hostility::kEndlessLog, testing::Hostility::kEmptyLogFrames}) {
    testing::HostileProvider provider(options(mode));
    const std::string report = mode == testing::Hostility::kEndlessLog ? "endless" : "empty";
    const Outcome out = verify(provider, report);
    EXPECT_EQ(out.exit_code, 1) << report << ": " << out.err;
    EXPECT_LT(out.peak_kib, kPeakKiB) << report;
    EXPECT_EQ(verdict(report).first, "rejected") << report;
  }
}

}  // namespace
}  // namespace vt
