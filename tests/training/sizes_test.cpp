// Every size a task names is checked against its data and the machine's memory before anything
// is allocated (training/sizes.h): the error names the field and the most that fits, and the
// most that fits does fit.
#include "training/sizes.h"

#include <gtest/gtest.h>

#include <iostream>

#include "common/safetensors.h"
#include "fingerprint/fingerprint.h"
#include "protocol/keys.h"
#include "protocol/log.h"
#include "training/data.h"
#include "training/trainer.h"
#include "training/zoo.h"

namespace vt::training {
namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
constexpr std::int64_t kTwoToThe62 = std::int64_t{1} << 62;

Task synthetic(const std::string& model) {
  Task task = *default_task(model, "synthetic");
  task.epochs = 1;
  task.steps_per_epoch = 2;
  return task;
}

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
  for (const ModelInfo& m : zoo_models()) {
    if (m.name == "torchscript") continue;
    auto r = check(synthetic(m.name));
    ASSERT_TRUE(r.ok()) << m.name << ": " << r.error().message;
    EXPECT_EQ(r->steps, 2);
    EXPECT_GT(r->memory, 0u);
  }
}

// Regression: a batch_size of 2^62 passed every check and ended `train` with exit 4
// ("start (0) + length (4611686018427387904) exceeds dimension size").
TEST(Sizes, BatchSizeTwoToThe62NamesBatchSizeAndTheMostThatFits) {
  Task task = synthetic("mlp");
  task.batch_size = kTwoToThe62;
  const std::int64_t most = most_named(check(task), "batch_size", kTwoToThe62);
  ASSERT_GT(most, 0);
  task.batch_size = most;
  EXPECT_TRUE(check(task).ok());
  task.batch_size = most + 1;
  EXPECT_FALSE(check(task).ok());
}

TEST(Sizes, StepsPerEpochBoundByTheEpochsOrder) {
  Task task = synthetic("mlp");
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
  Task task = synthetic("gpt");
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
  const TrainingTask resolved = *resolve_options(synthetic("mlp"));
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
  Task task = synthetic("mlp");
  task.model.options["input_dim"] = 4096;
  task.dataset.options["samples"] = 1 << 24;
  const std::int64_t most = most_named(check(task), "dataset.options.samples", 1 << 24);
  ASSERT_GT(most, 0);
  task.dataset.options["samples"] = most;
  EXPECT_TRUE(check(task).ok());
}

TEST(Sizes, ModelsTooLargeForMemoryNameTheirOptions) {
  Task mlp = synthetic("mlp");
  mlp.model.options["hidden"] = 65536;
  mlp.model.options["layers"] = 64;
  auto r = check(mlp);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("model.options: expected a model whose state fits in", 0), 0u)
      << r.error().message;
  EXPECT_NE(r.error().message.find("hidden 65536"), std::string::npos) << r.error().message;

  Task gpt = synthetic("gpt");
  gpt.model.options["seq_len"] = 65536;
  r = check(gpt, 64 * kGiB);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("model.options: expected one example to fit in", 0), 0u)
      << r.error().message;

  Task cnn = synthetic("cnn");
  cnn.model.options["width"] = 1024;
  cnn.model.options["blocks"] = 64;
  EXPECT_FALSE(check(cnn, 64 * kGiB).ok());

  Task conv3d = synthetic("conv3d");
  conv3d.model.options["size"] = 1024;
  EXPECT_FALSE(check(conv3d, 64 * kGiB).ok());
}

TEST(Sizes, EpochsBoundByTheSchedulesStepCount) {
  Task task = synthetic("mlp");
  task.epochs = kTwoToThe62;
  const std::int64_t most = most_named(check(task), "epochs", kTwoToThe62);
  EXPECT_EQ(most, (std::int64_t{1} << 53) / 2);
  task.epochs = most;
  EXPECT_TRUE(check(task).ok());
}

TEST(Sizes, IntraOpThreadsBeyond1024AreRefused) {
  Task task = synthetic("mlp");
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
  const TrainingTask task = *resolve_options(synthetic("mlp"));
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

// The torch-free counts agree with the models LibTorch builds: the parameters, and the
// floating-point tensors of the whole training state under each kind of optimizer (what the light
// `task init` sizes a fingerprint by).
TEST(Sizes, ZooCountsMatchTheTrainersModels) {
  std::vector<Task> tasks;
  for (const ModelInfo& m : zoo_models()) {
    if (m.name != "torchscript") tasks.push_back(synthetic(m.name));
  }
  Task mlp = synthetic("mlp");
  mlp.model.options = {{"input_dim", 70}, {"hidden", 5}, {"layers", 0}, {"classes", 3}};
  tasks.push_back(mlp);
  mlp.model.options = {{"input_dim", 7}, {"hidden", 9}, {"layers", 3}, {"classes", 3}};
  tasks.push_back(mlp);
  Task cnn = synthetic("cnn");
  cnn.model.options = {{"width", 3}, {"blocks", 2}, {"classes", 5}};
  tasks.push_back(cnn);
  Task gpt = synthetic("gpt");
  gpt.model.options = {{"vocab", 11},  {"d_model", 12},  {"layers", 3},          {"heads", 3},
                       {"seq_len", 5}, {"mlp_ratio", 2}, {"dropout_permille", 0}};
  tasks.push_back(gpt);
  for (Task& task : tasks) {
    task.fingerprint.k = task.fingerprint.tracking_k = 256;  // the small models hold fewer values
    // sgd holds one slot per parameter, none without momentum; adam and adamw hold two.
    for (const auto& [optimizer, momentum] :
         {std::pair{"sgd", true}, {"sgd", false}, {"adam", true}, {"adamw", true}}) {
      task.optimizer = default_optimizer(task.model.name, optimizer);
      if (!momentum) task.optimizer.momentum = 0.0;
      const std::string what =
          task.model.name + " with " + optimizer + (momentum ? "" : " without momentum");
      auto trainer = Trainer::create(task);
      ASSERT_TRUE(trainer.ok()) << what << ": " << trainer.error().message;
      const TrainingTask resolved = *resolve_options(task);
      EXPECT_EQ(zoo_parameter_count(task.model.name, resolved.model),
                static_cast<std::uint64_t>((*trainer)->parameter_count()))
          << what;
      StateCount built;
      for (const TensorEntry& t : (*trainer)->layout()) {
        if (!is_floating(t.dtype)) continue;
        ++built.tensors;
        built.elements += t.numel();
      }
      const StateCount counted = zoo_state_count(resolved);
      EXPECT_EQ(counted.tensors, built.tensors) << what;
      EXPECT_EQ(counted.elements, built.elements) << what;
      EXPECT_GT(built.tensors, 0u) << what;
    }
  }
}

TEST(Sizes, SyntheticShapeIsWhatLoadDatasetGenerates) {
  for (const ModelInfo& m : zoo_models()) {
    if (m.name == "torchscript") continue;
    const TrainingTask task = *resolve_options(synthetic(m.name));
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

// What the state's layout decides, as `train` checks it before epoch 0 and `task check` last.
Status fingerprint_sizes(const Task& task) {
  VT_ASSIGN_OR_RETURN(auto trainer, Trainer::create(task));
  return check_fingerprint_sizes(task, trainer->steps_per_epoch(), trainer->layout());
}

// Regression: a trail every step of a long epoch made one record of gigabytes, more than any
// verifier reads, and `train` ran out of memory building it (exit 4).
TEST(Sizes, TrailIntervalBoundByTheRecordLimit) {
  Task task = synthetic("mlp");
  task.batch_size = 1;
  task.steps_per_epoch = 20000;
  task.fingerprint.trail_interval = 1;
  task.fingerprint.tracking_k = 4096;
  Status s = fingerprint_sizes(task);
  ASSERT_FALSE(s.ok());
  const std::string& m = s.error().message;
  const std::string head = "fingerprint.trail_interval: expected at least ";
  ASSERT_EQ(m.rfind(head, 0), 0u) << m;
  const std::int64_t least = std::stoll(m.substr(head.size()));
  task.fingerprint.trail_interval = least;
  EXPECT_TRUE(fingerprint_sizes(task).ok());
  task.fingerprint.trail_interval = least - 1;
  EXPECT_FALSE(fingerprint_sizes(task).ok());
}

TEST(Sizes, FingerprintKBeyondTheRecordOrTheStateNamesTheField) {
  Task task = synthetic("mlp");
  task.fingerprint.k = kTwoToThe62;
  Status s = fingerprint_sizes(task);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::kInvalidInput);
  EXPECT_EQ(s.error().message.rfind("fingerprint.k: k = 4611686018427387904 exceeds the ", 0), 0u)
      << s.error().message;
  task = synthetic("gpt");
  task.model.options["vocab"] = 1 << 14;  // 6 million values, more than one record holds
  task.fingerprint.k = 5'000'000;
  s = fingerprint_sizes(task);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message.rfind("fingerprint.k: expected at most ", 0), 0u)
      << s.error().message;
}

// A verifier reads no record longer than record_bytes_bound, so every honest record must fit it:
// records built as the provider builds them (fingerprints over the real state, a tracking
// fingerprint and a trail point every step, held-out metrics, the largest environment a record
// may carry, signed), for every zoo model.
TEST(Sizes, EveryHonestRecordFitsTheBoundAVerifierReadsItWithin) {
  auto key = SigningKey::generate();
  ASSERT_TRUE(key.ok());
  for (const char* model : {"mlp", "cnn", "conv3d", "gpt"}) {
    Task task = synthetic(model);
    task.steps_per_epoch = 4;
    task.fingerprint.trail_interval = 1;
    auto trainer = Trainer::create(task);
    ASSERT_TRUE(trainer.ok()) << trainer.error().message;
    const Bytes state = *(*trainer)->snapshot();
    const auto view = parse_safetensors(state);
    ASSERT_TRUE(view.ok());
    auto fingerprint = [&](std::int64_t k, std::uint8_t seed) {
      Digest d{};
      d.fill(seed);
      auto f = fp::fingerprint_snapshot(*view, d, static_cast<std::uint64_t>(k));
      EXPECT_TRUE(f.ok()) << f.error().message;
      return fp::fingerprint_to_json(*f);
    };
    CommitRecord r;
    r.epoch = 123456;
    r.fingerprint = fingerprint(task.fingerprint.k, 1);
    r.tracking_fingerprint = fingerprint(task.fingerprint.tracking_k, 2);
    for (std::uint8_t step = 0; step < 4; ++step)
      r.trail.push_back(
          fingerprint(task.fingerprint.tracking_k, static_cast<std::uint8_t>(3 + step)));
    r.metrics = {1.0 / 3.0, 4, 12345.678, 1u << 30, EvalClaim{2.0 / 3.0, 0.123456789, 1u << 30}};
    Environment env;
    for (std::size_t i = 0; i < kMaxEnvironmentFields; ++i) {
      std::string name = std::to_string(i);
      // Control characters: JSON's longest escape, 6 bytes each.
      env[name + std::string(64 - name.size(), '\x01')] = std::string(kMaxEnvironmentValue, '\x02');
    }
    r.environment = env;
    r.time = utc_now_iso8601();
    auto signed_record = sign_record(r, *key);
    ASSERT_TRUE(signed_record.ok()) << signed_record.error().message;
    const std::uint64_t line = encode_record(*signed_record).size();
    const std::uint64_t bound =
        record_bytes_bound(task, (*trainer)->steps_per_epoch(), (*trainer)->layout());
    EXPECT_LE(line, bound) << model;
    std::cerr << model << ": a record of " << line << " bytes, bound " << bound << "\n";
  }
}

// The trainer runs the same checks before it builds anything: `train`, `task check`, `verify`
// and `audit` all create one.
TEST(Sizes, TrainerCreateRefusesBatchSizeTwoToThe62) {
  Task task = synthetic("mlp");
  task.batch_size = kTwoToThe62;
  auto trainer = Trainer::create(task);
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(trainer.error().code, Errc::kInvalidInput);
  EXPECT_EQ(trainer.error().message.rfind("batch_size: expected at most ", 0), 0u)
      << trainer.error().message;
}

}  // namespace
}  // namespace vt::training
