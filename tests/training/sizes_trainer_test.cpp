// The sizes of training/zoo/sizes.h against the state the trainer builds: the torch-free counts
// match LibTorch's models, fingerprint and record sizes bound by the real layout, and
// Trainer::create runs the same checks before it builds anything. The checks that need no model are
// in sizes_test.cpp, in a program that does not load LibTorch.
#include <gtest/gtest.h>

#include <iostream>

#include "common/safetensors.h"
#include "fingerprint/fingerprint.h"
#include "protocol/keys.h"
#include "protocol/log.h"
#include "tests/training/synthetic_task.h"
#include "training/trainer.h"
#include "training/zoo/sizes.h"
#include "training/zoo/zoo.h"

namespace vt::training {
namespace {

constexpr std::int64_t kTwoToThe62 = std::int64_t{1} << 62;

// The torch-free counts agree with the models LibTorch builds: the parameters, and the
// floating-point tensors of the whole training state under each kind of optimizer (what the light
// `task init` sizes a fingerprint by).
TEST(SizesOfTheBuiltState, ZooCountsMatchTheTrainersModels) {
  std::vector<Task> tasks;
  for (const ModelRow& m : zoo_models()) {
    if (!m.user_module) tasks.push_back(synthetic_task(m.name));
  }
  Task mlp = synthetic_task("mlp");
  mlp.model.options = {{"input_dim", 70}, {"hidden", 5}, {"layers", 0}, {"classes", 3}};
  tasks.push_back(mlp);
  mlp.model.options = {{"input_dim", 7}, {"hidden", 9}, {"layers", 3}, {"classes", 3}};
  tasks.push_back(mlp);
  Task cnn = synthetic_task("cnn");
  cnn.model.options = {{"width", 3}, {"blocks", 2}, {"classes", 5}};
  tasks.push_back(cnn);
  Task gpt = synthetic_task("gpt");
  gpt.model.options = {{"vocab", 11},  {"d_model", 12},  {"layers", 3},          {"heads", 3},
                       {"seq_len", 5}, {"mlp_ratio", 2}, {"dropout_permille", 0}};
  tasks.push_back(gpt);
  for (Task& task : tasks) {
    task.fingerprint.k = task.fingerprint.tracking_k = 256;  // the small models hold fewer values
    // sgd holds one slot per parameter, none without momentum; adam and adamw hold two.
    for (const auto& [optimizer, momentum] :
         {std::pair{"sgd", true}, {"sgd", false}, {"adam", true}, {"adamw", true}}) {
      task.optimizer = default_optimizer(*find_model(task.model.name), optimizer);
      if (!momentum) task.optimizer.momentum = 0.0;
      const std::string what =
          task.model.name + " with " + optimizer + (momentum ? "" : " without momentum");
      auto trainer = Trainer::create(task);
      ASSERT_TRUE(trainer.ok()) << what << ": " << trainer.error().message;
      const TrainingTask resolved = *resolve_options(task);
      EXPECT_EQ(zoo_parameter_count(resolved),
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

// What the state's layout decides, as `train` checks it before epoch 0 and `task check` last.
Status fingerprint_sizes(const Task& task) {
  VT_ASSIGN_OR_RETURN(auto trainer, Trainer::create(task));
  return check_fingerprint_sizes(task, trainer->steps_per_epoch(), trainer->layout());
}

// Regression: a trail every step of a long epoch made one record of gigabytes, more than any
// verifier reads, and `train` ran out of memory building it (exit 4).
TEST(SizesOfTheBuiltState, TrailIntervalBoundByTheRecordLimit) {
  Task task = synthetic_task("mlp");
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

TEST(SizesOfTheBuiltState, FingerprintKBeyondTheRecordOrTheStateNamesTheField) {
  Task task = synthetic_task("mlp");
  task.fingerprint.k = kTwoToThe62;
  Status s = fingerprint_sizes(task);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::kInvalidInput);
  EXPECT_EQ(s.error().message.rfind("fingerprint.k: k = 4611686018427387904 exceeds the ", 0), 0u)
      << s.error().message;
  task = synthetic_task("gpt");
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
TEST(SizesOfTheBuiltState, EveryHonestRecordFitsTheBoundAVerifierReadsItWithin) {
  auto key = SigningKey::generate();
  ASSERT_TRUE(key.ok());
  for (const char* model : {"mlp", "cnn", "conv3d", "gpt"}) {
    Task task = synthetic_task(model);
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
TEST(SizesOfTheBuiltState, TrainerCreateRefusesBatchSizeTwoToThe62) {
  Task task = synthetic_task("mlp");
  task.batch_size = kTwoToThe62;
  auto trainer = Trainer::create(task);
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(trainer.error().code, Errc::kInvalidInput);
  EXPECT_EQ(trainer.error().message.rfind("batch_size: expected at most ", 0), 0u)
      << trainer.error().message;
}

}  // namespace
}  // namespace vt::training
