// Every size a task names is checked against its data and the machine's memory before anything
// is allocated (training/zoo/sizes.h): the error names the field and the most that fits, and the
// most that fits does fit.
#include "training/zoo/sizes.h"

#include <gtest/gtest.h>

#include "tests/training/synthetic_task.h"
#include "training/data/data.h"
#include "training/zoo/zoo.h"

namespace vt::training {
namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
constexpr std::int64_t kTwoToThe62 = std::int64_t{1} << 62;

Result<TaskSizes> check(const Task& task, std::uint64_t memory = kGiB) {
  VT_ASSIGN_OR_RETURN(const TrainingTask resolved, resolve_options(task));
  return check_sizes(resolved, synthetic_shape(resolved), memory);
}

// The message names `field`, says "expected at most N" and quotes the value given; returns N.
std::int64_t most_named(const Result<TaskSizes>& r, const std::string& field, std::int64_t given) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return -1;
  EXPECT_EQ(r.error().code, Errc::kInvalidInput);
  const std::string& m = r.error().message;
  const std::string head = field + ": expected at most ";
  EXPECT_NE(m.find("got " + std::to_string(given)), std::string::npos) << m;
  if (m.rfind(head, 0) != 0) {
    ADD_FAILURE() << "expected \"" << head << "...\", got: " << m;
    return -1;
  }
  return std::stoll(m.substr(head.size()));
}

TEST(Sizes, DefaultTasksOfEveryZooModelFit) {
  for (const ModelRow& m : zoo_models()) {
    if (m.user_module) continue;
    auto r = check(synthetic_task(m.name));
    ASSERT_TRUE(r.ok()) << m.name << ": " << r.error().message;
    EXPECT_EQ(r->steps, 2);
    EXPECT_GT(r->memory, 0u);
  }
}

// Regression: a batch_size of 2^62 passed every check and ended `train` with exit 4
// ("start (0) + length (4611686018427387904) exceeds dimension size").
TEST(Sizes, BatchSizeTwoToThe62NamesBatchSizeAndTheMostThatFits) {
  Task task = synthetic_task("mlp");
  task.batch_size = kTwoToThe62;
  const std::int64_t most = most_named(check(task), "batch_size", kTwoToThe62);
  ASSERT_GT(most, 0);
  task.batch_size = most;
  EXPECT_TRUE(check(task).ok());
  task.batch_size = most + 1;
  EXPECT_FALSE(check(task).ok());
}

TEST(Sizes, StepsPerEpochBoundByTheEpochsOrder) {
  Task task = synthetic_task("mlp");
  task.steps_per_epoch = std::int64_t{1} << 40;
  const std::int64_t most = most_named(check(task), "steps_per_epoch", task.steps_per_epoch);
  ASSERT_GT(most, 0);
  task.steps_per_epoch = most;
  EXPECT_TRUE(check(task).ok());
  task.steps_per_epoch = most + 1;
  EXPECT_FALSE(check(task).ok());
}

// A whole pass over memory-mapped data is one order of every example: a large token file names
// steps_per_epoch, whose 0 asked for the whole pass.
TEST(Sizes, AWholePassOverMappedDataNamesStepsPerEpoch) {
  Task task = synthetic_task("gpt");
  task.steps_per_epoch = 0;
  TrainingTask resolved = *resolve_options(task);
  DataShape tokens;
  tokens.examples = std::int64_t{1} << 40;
  tokens.input_bytes = tokens.target_bytes = std::uint64_t{8} * 32;
  auto r = check_sizes(resolved, tokens, kGiB);
  const std::int64_t most = most_named(r, "steps_per_epoch", 0);
  ASSERT_GT(most, 0);
  resolved.task.steps_per_epoch = most;
  EXPECT_TRUE(check_sizes(resolved, tokens, kGiB).ok());
}

// Rows of a `tensors` dataset are permuted whole every pass, however few an epoch takes.
TEST(Sizes, RowsTooManyToPermuteNameTheDataset) {
  const TrainingTask resolved = *resolve_options(synthetic_task("mlp"));
  DataShape rows;
  rows.examples = rows.permuted = std::int64_t{1} << 40;
  rows.input_bytes = std::uint64_t{4} * 32;
  rows.target_bytes = 8;
  auto r = check_sizes(resolved, rows, kGiB);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("dataset: expected at most ", 0), 0u) << r.error().message;
  EXPECT_NE(r.error().message.find("every pass permutes all of them"), std::string::npos)
      << r.error().message;
  rows.examples = rows.permuted = 1 << 20;
  EXPECT_TRUE(check_sizes(resolved, rows, kGiB).ok());
}

TEST(Sizes, SyntheticSamplesBoundByMemory) {
  Task task = synthetic_task("mlp");
  task.model.options["input_dim"] = 4096;
  task.dataset.options["samples"] = 1 << 24;
  const std::int64_t most = most_named(check(task), "dataset.options.samples", 1 << 24);
  ASSERT_GT(most, 0);
  task.dataset.options["samples"] = most;
  EXPECT_TRUE(check(task).ok());
}

TEST(Sizes, ModelsTooLargeForMemoryNameTheirOptions) {
  Task mlp = synthetic_task("mlp");
  mlp.model.options["hidden"] = 65536;
  mlp.model.options["layers"] = 64;
  auto r = check(mlp);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("model.options: expected a model whose state fits in", 0), 0u)
      << r.error().message;
  EXPECT_NE(r.error().message.find("hidden 65536"), std::string::npos) << r.error().message;

  Task gpt = synthetic_task("gpt");
  gpt.model.options["seq_len"] = 65536;
  r = check(gpt, 64 * kGiB);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("model.options: expected one example to fit in", 0), 0u)
      << r.error().message;

  Task cnn = synthetic_task("cnn");
  cnn.model.options["width"] = 1024;
  cnn.model.options["blocks"] = 64;
  EXPECT_FALSE(check(cnn, 64 * kGiB).ok());

  Task conv3d = synthetic_task("conv3d");
  conv3d.model.options["size"] = 1024;
  EXPECT_FALSE(check(conv3d, 64 * kGiB).ok());
}

TEST(Sizes, EpochsBoundByTheSchedulesStepCount) {
  Task task = synthetic_task("mlp");
  task.epochs = kTwoToThe62;
  const std::int64_t most = most_named(check(task), "epochs", kTwoToThe62);
  EXPECT_EQ(most, (std::int64_t{1} << 53) / 2);
  task.epochs = most;
  EXPECT_TRUE(check(task).ok());
}

TEST(Sizes, IntraOpThreadsBeyond1024AreRefused) {
  Task task = synthetic_task("mlp");
  task.intra_op_threads = std::int64_t{1} << 40;
  auto r = check(task);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "intra_op_threads: expected at most 1024, got 1099511627776");
  task.intra_op_threads = 1024;
  EXPECT_TRUE(check(task).ok());
}

// `train` starts a task's world_size ranks on this machine when no --nproc says otherwise: a
// world_size of 2^20 (gradient_groups allows it) would have forked a million LibTorch processes.
TEST(Sizes, LocalRanksBoundByMemory) {
  const TrainingTask task = *resolve_options(synthetic_task("mlp"));
  Status s = check_local_ranks(task, 1 << 20, "world_size", 16 * kGiB);
  ASSERT_FALSE(s.ok());
  const std::string head = "world_size: expected at most ";
  ASSERT_EQ(s.error().message.rfind(head, 0), 0u) << s.error().message;
  const std::int64_t most = std::stoll(s.error().message.substr(head.size()));
  EXPECT_GE(most, 100);  // the small mlp's ranks are mostly LibTorch
  EXPECT_LT(most, 128);
  EXPECT_TRUE(check_local_ranks(task, most, "world_size", 16 * kGiB).ok());
  EXPECT_FALSE(check_local_ranks(task, most + 1, "--nproc", 16 * kGiB).ok());
}

TEST(Sizes, SyntheticShapeIsWhatLoadDatasetGenerates) {
  for (const ModelRow& m : zoo_models()) {
    if (m.user_module) continue;
    const TrainingTask task = *resolve_options(synthetic_task(m.name));
    auto data = load_dataset(task, ".");
    ASSERT_TRUE(data.ok()) << data.error().message;
    const DataShape want = resident_shape(*data);
    const DataShape got = synthetic_shape(task);
    EXPECT_EQ(got.examples, want.examples) << m.name;
    EXPECT_EQ(got.input_bytes, want.input_bytes) << m.name;
    EXPECT_EQ(got.target_bytes, want.target_bytes) << m.name;
    EXPECT_TRUE(got.resident);
  }
}

}  // namespace
}  // namespace vt::training
