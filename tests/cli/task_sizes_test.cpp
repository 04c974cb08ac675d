// A task whose sizes cannot be trained on this machine is refused by `train` and `task check`
// before anything runs: exit 2, the field named with the most that fits, nothing committed.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "tests/test_util.h"

namespace vt {
namespace {

using testing::run_command;
using testing::veritrain_binary;
namespace fs = std::filesystem;

class TaskSizes : public ::testing::Test {
 protected:
  // A tiny mlp task from `task init` (which refuses these sizes itself), then `field` set by
  // hand, as a requestor editing task.json would.
  std::string task(const std::string& field, std::int64_t value) {
    std::string file = (dir_ / "task.json").string();
    auto init = run_command(
        veritrain_binary() + " task init --model mlp --epochs 1 --steps-per-epoch 2 --out " + file,
        dir_.path());
    EXPECT_EQ(init.exit_code, 0) << init.err;
    auto j = nlohmann::json::parse(*read_text_file(file));
    j[field] = value;
    EXPECT_TRUE(write_file_atomic(file, j.dump(2)).ok());
    return file;
  }

  testing::ScratchDir dir_;
};

// Regression: batch_size 2^62 passed `task show` and ended `train` with exit 4 ("start (0) +
// length (4611686018427387904) exceeds dimension size"), `task check` likewise.
TEST_F(TaskSizes, BatchSizeTwoToThe62IsAnInputErrorNamingTheField) {
  const std::string file = task("batch_size", std::int64_t{1} << 62);
  const fs::path work = dir_ / "w";
  auto train = run_command(
      veritrain_binary() + " train --task " + file + " --workdir " + work.string(), dir_.path());
  EXPECT_EQ(train.exit_code, 2) << train.err;
  EXPECT_NE(train.err.find("batch_size: expected at most "), std::string::npos) << train.err;
  EXPECT_NE(train.err.find("got 4611686018427387904"), std::string::npos) << train.err;
  std::error_code ec;
  EXPECT_TRUE(!fs::exists(work / "commitments.log") ||
              fs::file_size(work / "commitments.log", ec) == 0)
      << "epoch 0 was committed for a task that cannot run";

  auto check = run_command(veritrain_binary() + " task check " + file, dir_.path());
  EXPECT_EQ(check.exit_code, 2) << check.err;
  EXPECT_NE(check.err.find("batch_size: expected at most "), std::string::npos) << check.err;
}

// `task check` trains short epochs of its own; the task's own epochs must still fit. It used to
// pass a task whose steps_per_epoch `train` could never run.
TEST_F(TaskSizes, TaskCheckJudgesTheTasksOwnEpochs) {
  const std::string file = task("steps_per_epoch", std::int64_t{1} << 40);
  auto check = run_command(veritrain_binary() + " task check " + file, dir_.path());
  EXPECT_EQ(check.exit_code, 2) << check.err;
  EXPECT_NE(check.err.find("steps_per_epoch: expected at most "), std::string::npos) << check.err;
}

}  // namespace
}  // namespace vt
