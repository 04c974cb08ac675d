// One rule for exit codes (docs/cli.md, "Exit codes"): the caller's own missing or mismatched
// inputs are 2 in every command, the provider's faults 1, the caller's side failing to do I/O 3.
// The table below is command x mistake -> exit code; each row names what it checks.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "tests/test_util.h"

namespace vt {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::veritrain_binary;

struct Row {
  std::string mistake;
  std::string command;  // after `veritrain`; T: the task, W: its workdir, O: another task's
  int exit_code;
  std::string says;  // a part of the message on stderr
};

class ExitCodes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ScratchDir();
    const std::string init = veritrain_binary() +
                             " task init --model mlp --epochs 2 --steps-per-epoch 2 "
                             "--batch-size 8 --option hidden=8 --k 64 --seed ";
    ASSERT_EQ(
        run_command(init + "1 --out " + (*dir_ / "task.json").string(), dir_->path()).exit_code, 0);
    ASSERT_EQ(
        run_command(init + "2 --out " + (*dir_ / "other.json").string(), dir_->path()).exit_code,
        0);
    auto train =
        run_command(veritrain_binary() + " train --task " + (*dir_ / "task.json").string() +
                        " --workdir " + (*dir_ / "wd").string(),
                    dir_->path());
    ASSERT_EQ(train.exit_code, 0) << train.err;
    ready_ = true;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static std::string expand(std::string command) {
    const std::pair<std::string, std::string> names[] = {{"T", (*dir_ / "task.json").string()},
                                                         {"O", (*dir_ / "other.json").string()},
                                                         {"W", (*dir_ / "wd").string()},
                                                         {"R", (*dir_ / "report").string()}};
    std::string out;
    std::size_t at = 0;
    while (at < command.size()) {
      bool replaced = false;
      for (const auto& [name, value] : names) {
        const bool word_start = at == 0 || command[at - 1] == ' ';
        const bool word_end = at + 1 == command.size() || command[at + 1] == ' ';
        if (word_start && word_end && command.compare(at, name.size(), name) == 0) {
          out += value;
          at += name.size();
          replaced = true;
          break;
        }
      }
      if (!replaced) out += command[at++];
    }
    return out;
  }

  // A suite whose setup failed must fail, not skip.
  void SetUp() override { ASSERT_TRUE(ready_) << "the shared task and workdir were not made"; }

  static void check(const std::vector<Row>& rows) {
    for (const Row& row : rows) {
      const auto r = run_command(veritrain_binary() + " " + expand(row.command), dir_->path());
      EXPECT_EQ(r.exit_code, row.exit_code) << row.mistake << ": veritrain " << row.command << "\n"
                                            << r.out << r.err;
      EXPECT_NE(r.err.find(row.says), std::string::npos)
          << row.mistake << ": veritrain " << row.command << "\n"
          << r.err;
    }
  }

  static testing::ScratchDir* dir_;
  static bool ready_;
};
testing::ScratchDir* ExitCodes::dir_ = nullptr;
bool ExitCodes::ready_ = false;

TEST_F(ExitCodes, AMissingInputFileIsTheCallersMistakeInEveryCommand) {
  check({
      {"missing task", "task show nope.json", 2, "task file nope.json: no such file"},
      {"missing task", "task check nope.json", 2, "task file nope.json: no such file"},
      {"missing task", "train --task nope.json --workdir fresh", 2, "no such file"},
      {"missing task", "verify --task nope.json --workdir W --report R", 2, "no such file"},
      {"missing task", "audit --task nope.json --workdir W --epoch 1", 2, "no such file"},
      {"missing task", "plan --task nope.json", 2, "no such file"},
      {"missing task", "estimate --task nope.json", 2, "no such file"},
      {"missing file", "inspect nope.json", 2, "inspect: nope.json: no such file"},
      {"missing verdict", "verdict check nope.json", 2, "verdict nope.json: no such file"},
      {"missing evidence", "audit --task T --workdir W --check nope.json", 2,
       "--check nope.json: no such file"},
      {"missing workdir", "log verify --workdir nowd", 2, "not a veritrain workdir"},
      {"a folder as the task", "task show W", 2, "is a folder, not a file"},
      {"missing token",
       "verify --task T --provider 127.0.0.1:1 --token-file nope.token --insecure --report R", 2,
       "--token-file nope.token: no such file"},
  });
}

TEST_F(ExitCodes, MismatchedInputsAreTheCallersMistakeAndNothingIsSigned) {
  check({
      {"workdir of another task", "verify --task O --workdir W --report R", 2, "holds task"},
      {"workdir of another task", "audit --task O --workdir W --epoch 1", 2, "holds task"},
      {"mistyped flag", "train --taks T", 2, "did you mean --task?"},
      {"mistyped command", "trian --task T", 2, "did you mean 'veritrain train'?"},
      {"mistyped model", "task init --model gtp --out typo.json", 2,
       "--model gtp: not a model; did you mean gpt?"},
  });
  EXPECT_FALSE(fs::exists(*dir_ / "report" / "verdict.json"));
}

// The same mismatch with the provider's key pinned: the pinned provider signed work for another
// task and delivered it as this one's. That is a finding about the provider, signed, naming both
// tasks (exit 1), not the caller's mistake.
TEST_F(ExitCodes, AWorkdirOfAnotherTaskSignedByThePinnedProviderIsASignedRejection) {
  const std::string report = (*dir_ / "report-pinned").string();
  const auto r = run_command(veritrain_binary() + " verify --task " + expand("O") + " --workdir " +
                                 expand("W") + " --provider-key " +
                                 (*dir_ / "wd" / "keys" / "signing.pub.pem").string() +
                                 " --check-probability 1 --report " + report,
                             dir_->path());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("the log, signed by the pinned provider key, commits to task"),
            std::string::npos)
      << r.out << r.err;
  EXPECT_NE(r.out.find("(pinned)"), std::string::npos) << r.out;
  Result<Bytes> verdict = read_file(fs::path(report) / "verdict.json");
  ASSERT_TRUE(verdict.ok());
  EXPECT_NE(std::string(verdict->begin(), verdict->end()).find("\"rejected\""), std::string::npos);
}

TEST_F(ExitCodes, ASignedVerdictIsReplacedOnlyWithForce) {
  const std::string verify = "verify --task T --workdir W --check-probability 1 --report R";
  check({{"first verify", verify, 0, ""}});
  Result<Bytes> first = read_file(*dir_ / "report" / "verdict.json");
  ASSERT_TRUE(first.ok());
  check({{"verdict already there", verify, 2, "already holds a signed verdict"}});
  EXPECT_EQ(*read_file(*dir_ / "report" / "verdict.json"), *first);
  check({{"--force", verify + " --force", 0, ""}});
  fs::remove_all(*dir_ / "report");
}

}  // namespace
}  // namespace vt
