// Replays land on the same bytes: every zoo model x optimizer, restored in a fresh process.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/file_io.h"
#include "tests/test_util.h"
#include "training/estimate.h"
#include "training/trainer.h"
#include "training/zoo/zoo.h"

namespace vt::training {
namespace {

// Small enough that 12 combinations train in seconds on one core.
Task small_task(const std::string& model, const std::string& optimizer) {
  Task task = *default_task(model, "synthetic");
  task.epochs = 3;
  task.steps_per_epoch = 2;
  if (model == "cnn") {
    task.model.options = {{"width", 4}, {"blocks", 1}, {"classes", 10}};
    task.dataset.options = {{"samples", 16}};
    task.batch_size = 4;
  } else if (model == "gpt") {
    task.model.options = {
        {"vocab", 16},    {"d_model", 16},          {"layers", 1}, {"heads", 2}, {"seq_len", 8},
        {"mlp_ratio", 2}, {"dropout_permille", 100}};  // dropout: RNG state matters
    task.dataset.options = {{"samples", 16}};
    task.batch_size = 4;
  } else if (model == "conv3d") {
    task.model.options = {{"size", 6}};
    task.dataset.options = {{"samples", 4}};
    task.batch_size = 2;
  } else {
    task.dataset.options = {{"samples", 64}};
    task.batch_size = 8;
  }
  task.optimizer.name = optimizer;
  if (optimizer == "sgd") {
    task.optimizer = {
        .name = "sgd", .lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-4};
  } else {
    task.optimizer = {
        .name = optimizer, .lr = 1e-3, .weight_decay = optimizer == "adamw" ? 0.01 : 1e-4};
  }
  return task;
}

testing::CommandResult replay(const testing::ScratchDir& dir, const Task& task, const Bytes& before,
                              int threads = 0) {
  EXPECT_TRUE(write_file_atomic(dir / "task.json", pretty_task_json(task)).ok());
  EXPECT_TRUE(write_file_atomic(dir / "before.safetensors", before).ok());
  std::string cmd = std::string(VT_REPLAY_TOOL) + " " + (dir / "task.json").string() + " " +
                    (dir / "before.safetensors").string() + " " +
                    (dir / "after.safetensors").string();
  if (threads > 0) cmd += " " + std::to_string(threads);
  return testing::run_command(cmd, dir.path());
}

struct Combo {
  std::string model, optimizer;
};

class ReplayMatrix : public ::testing::TestWithParam<Combo> {};

TEST_P(ReplayMatrix, EpochTwoReplaysBitIdenticallyInAFreshProcess) {
  const Task task = small_task(GetParam().model, GetParam().optimizer);
  auto trainer = Trainer::create(task);
  ASSERT_TRUE(trainer.ok()) << trainer.error().message;
  std::vector<Bytes> snapshots;
  snapshots.push_back(*(*trainer)->snapshot());
  for (int e = 1; e <= 3; ++e) {
    auto summary = (*trainer)->train_epoch();
    ASSERT_TRUE(summary.ok()) << summary.error().message;
    EXPECT_EQ(summary->epoch, e);
    EXPECT_TRUE(std::isfinite(summary->mean_loss));
    snapshots.push_back(*(*trainer)->snapshot());
  }
  EXPECT_NE(snapshots[1], snapshots[2]) << "training did not change the state";

  testing::ScratchDir dir;
  auto r = replay(dir, task, snapshots[1]);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto replayed = read_file(dir / "after.safetensors");
  ASSERT_TRUE(replayed.ok());
  EXPECT_TRUE(*replayed == snapshots[2]) << "replay of epoch 2 differs from the original";

  // A verifier replays every challenged epoch in one trainer, loading each start state into it
  // (Trainer::load): from a trainer that has moved on to epoch 3, and in any order, each epoch
  // lands on the bytes it did, and loading builds no trainer.
  const std::uint64_t built = trainers_built();
  for (int e : {2, 1, 3}) {
    ASSERT_TRUE((*trainer)->load(snapshots[static_cast<std::size_t>(e - 1)]).ok());
    EXPECT_EQ((*trainer)->epoch(), e - 1);
    ASSERT_TRUE((*trainer)->train_epoch().ok());
    EXPECT_TRUE(*(*trainer)->snapshot() == snapshots[static_cast<std::size_t>(e)])
        << "epoch " << e << " replayed in a reused trainer differs from the original";
  }
  EXPECT_EQ(trainers_built(), built);
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, ReplayMatrix,
    ::testing::Values(Combo{"mlp", "sgd"}, Combo{"mlp", "adam"}, Combo{"mlp", "adamw"},
                      Combo{"cnn", "sgd"}, Combo{"cnn", "adam"}, Combo{"cnn", "adamw"},
                      Combo{"conv3d", "sgd"}, Combo{"conv3d", "adam"}, Combo{"conv3d", "adamw"},
                      Combo{"gpt", "sgd"}, Combo{"gpt", "adam"}, Combo{"gpt", "adamw"}),
    [](const auto& info) { return info.param.model + "_" + info.param.optimizer; });

TEST(Replay, OtherThreadCountIsRefusedInExactMode) {
  const Task task = small_task("mlp", "sgd");
  auto trainer = Trainer::create(task);
  ASSERT_TRUE(trainer.ok());
  ASSERT_TRUE((*trainer)->train_epoch().ok());
  testing::ScratchDir dir;
  auto r = replay(dir, task, *(*trainer)->snapshot(), /*threads=*/2);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("made with 1 intra-op threads, this replay uses 2"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("exact mode"), std::string::npos) << r.err;
  auto same = replay(dir, task, *(*trainer)->snapshot(), /*threads=*/1);
  EXPECT_EQ(same.exit_code, 0) << same.err;
}

TEST(Replay, OtherThreadCountIsAllowedAndReportedInToleranceMode) {
  Task task = small_task("mlp", "adam");
  task.determinism = Determinism::kTolerance;
  task.tolerance = {1e-6, 1e-4, 1e-4, 0.01};
  auto trainer = Trainer::create(task);
  ASSERT_TRUE(trainer.ok()) << trainer.error().message;
  testing::ScratchDir dir;
  auto r = replay(dir, task, *(*trainer)->snapshot(), /*threads=*/2);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("note: snapshot was made with 1 intra-op threads"), std::string::npos)
      << r.err;
}

TEST(Replay, DamagedSnapshotsAreRejectedWithTheProblemNamed) {
  const Task task = small_task("mlp", "sgd");
  auto trainer = Trainer::create(task);
  ASSERT_TRUE(trainer.ok());
  Bytes good = *(*trainer)->snapshot();

  Bytes truncated(good.begin(), good.end() - 5);
  auto t = Trainer::restore(task, truncated);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("data_offsets"), std::string::npos) << t.error().message;

  Bytes header_flip = good;
  header_flip[12] ^= 0x20;  // inside the JSON header
  EXPECT_FALSE(Trainer::restore(task, header_flip).ok());

  Task other = task;
  other.seed += 1;
  auto wrong_task = Trainer::restore(other, good);
  ASSERT_FALSE(wrong_task.ok());
  EXPECT_NE(wrong_task.error().message.find("belongs to task"), std::string::npos);

  Task other_model = task;
  other_model.model.options["hidden"] = 8;
  auto wrong_model = Trainer::restore(other_model, good);
  ASSERT_FALSE(wrong_model.ok());
}

// The canonical bytes of a tiny fixed state. Regenerate with VT_UPDATE_GOLDEN=1 only when the
// snapshot format changes on purpose (and bump kSnapshotFormat).
TEST(Snapshot, TinyStateMatchesGoldenFile) {
  Task task = *default_task("mlp", "synthetic");
  task.model.options = {{"input_dim", 2}, {"hidden", 3}, {"layers", 1}, {"classes", 2}};
  task.dataset.options = {{"samples", 8}, {"input_dim", 32}, {"classes", 4}};
  task.batch_size = 4;
  task.steps_per_epoch = 1;
  task.seed = 7;
  auto trainer = Trainer::create(task);
  ASSERT_TRUE(trainer.ok()) << trainer.error().message;
  ASSERT_TRUE((*trainer)->train_epoch().ok());
  Bytes bytes = *(*trainer)->snapshot();
  const std::string golden = std::string(VT_GOLDEN_DIR) + "/tiny_mlp_epoch1.safetensors";
  if (std::getenv("VT_UPDATE_GOLDEN") != nullptr) {
    ASSERT_TRUE(write_file_atomic(golden, bytes).ok());
  }
  auto expected = read_file(golden);
  ASSERT_TRUE(expected.ok()) << expected.error().message;
  EXPECT_TRUE(bytes == *expected) << "snapshot bytes differ from " << golden;
}

TEST(Snapshot, LayoutListsEveryStateTensorSorted) {
  const Task task = small_task("cnn", "adam");
  auto trainer = Trainer::create(task);
  ASSERT_TRUE(trainer.ok());
  auto layout = (*trainer)->layout();
  ASSERT_FALSE(layout.empty());
  for (std::size_t i = 1; i < layout.size(); ++i) EXPECT_LT(layout[i - 1].name, layout[i].name);
  auto has = [&](const std::string& n) {
    return std::any_of(layout.begin(), layout.end(),
                       [&](const TensorEntry& e) { return e.name == n; });
  };
  EXPECT_TRUE(has("param/stem.weight"));
  EXPECT_TRUE(has("buffer/stem_bn.running_mean"));
  EXPECT_TRUE(has("optim/stem.weight/exp_avg_sq"));
  EXPECT_TRUE(has("optim/stem.weight/step"));
  EXPECT_TRUE(has("rng/cpu"));
  std::uint64_t idx[] = {0, 3};
  auto values = (*trainer)->gather("param/stem.weight", idx);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(values->size(), 8u);
  std::uint64_t bad[] = {1u << 30};
  EXPECT_FALSE((*trainer)->gather("param/stem.weight", bad).ok());
}

// gather_many returns, per request, exactly the bytes the snapshot holds at those positions.
TEST(Snapshot, GatherManyMatchesTheSnapshotBytes) {
  const Task task = small_task("gpt", "adamw");
  auto trainer = Trainer::create(task);
  ASSERT_TRUE(trainer.ok());
  ASSERT_TRUE((*trainer)->train_epoch().ok());
  Bytes snapshot = *(*trainer)->snapshot();
  auto view = parse_safetensors(snapshot);
  ASSERT_TRUE(view.ok());
  std::vector<std::vector<std::uint64_t>> positions;
  std::vector<Trainer::GatherRequest> requests;
  std::vector<const TensorEntry*> entries;
  for (const TensorEntry& e : view->tensors) {
    if (e.name.rfind("rng/", 0) == 0 || e.numel() == 0) continue;
    positions.push_back({0, e.numel() - 1, e.numel() / 2});
    entries.push_back(&e);
  }
  for (std::size_t i = 0; i < entries.size(); ++i)
    requests.push_back({entries[i]->name, positions[i]});
  auto values = (*trainer)->gather_many(requests);
  ASSERT_TRUE(values.ok()) << values.error().message;
  ASSERT_EQ(values->size(), entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::size_t width = dtype_size(entries[i]->dtype);
    ByteSpan data = view->data(*entries[i]);
    Bytes expected;
    for (std::uint64_t p : positions[i])
      expected.insert(expected.end(), data.begin() + p * width, data.begin() + (p + 1) * width);
    EXPECT_EQ((*values)[i], expected) << entries[i]->name;
  }
  std::uint64_t outside[] = {1u << 30};
  Trainer::GatherRequest bad[] = {{entries.front()->name, outside}};
  EXPECT_FALSE((*trainer)->gather_many(bad).ok());
}

// optimizer.ema_decay (docs/training.md, "Recipes"): the average starts at the initial weights
// and floating-point buffers, moves by a ⊗ d ⊕ x ⊗ (1 − d) after the update in either
// arithmetic, and is what export writes unless told otherwise.
class MovingAverage : public ::testing::TestWithParam<Determinism> {};

std::vector<float> floats_of(const SafetensorsView& view, const std::string& name) {
  const TensorEntry* e = view.find(name);
  if (e == nullptr || e->dtype != DType::kF32) return {};
  std::vector<float> out(static_cast<std::size_t>(e->numel()));
  std::memcpy(out.data(), view.data(*e).data(), out.size() * sizeof(float));
  return out;
}

TEST_P(MovingAverage, StartsAtTheInitialWeightsAndMovesByTheDocumentedUpdate) {
  Task task = small_task("cnn", "sgd");  // batch norm: running statistics are averaged too
  task.determinism = GetParam();
  task.steps_per_epoch = 1;
  task.optimizer.ema_decay = 0.9;
  auto trainer = Trainer::create(task);
  ASSERT_TRUE(trainer.ok()) << trainer.error().message;
  const Bytes s0 = *(*trainer)->snapshot();
  ASSERT_TRUE((*trainer)->train_epoch().ok());
  const Bytes s1 = *(*trainer)->snapshot();
  auto v0 = parse_safetensors(s0), v1 = parse_safetensors(s1);
  ASSERT_TRUE(v0.ok() && v1.ok());
  auto exported = (*trainer)->export_safetensors(), trained = (*trainer)->export_safetensors(false);
  ASSERT_TRUE(exported.ok() && trained.ok());
  auto ve = parse_safetensors(*exported), vt = parse_safetensors(*trained);
  ASSERT_TRUE(ve.ok() && vt.ok());
  const float decay = 0.9f, rest = static_cast<float>(1.0 - 0.9);
  std::size_t averaged = 0;
  for (const TensorEntry& e : v1->tensors) {
    const bool param = e.name.rfind("param/", 0) == 0, buffer = e.name.rfind("buffer/", 0) == 0;
    if (!param && !buffer) continue;
    const std::string own = e.name.substr(e.name.find('/') + 1);
    const std::string ema = "ema/" + own;
    if (e.dtype != DType::kF32) {
      EXPECT_EQ(v1->find(ema), nullptr) << "an integer buffer is not averaged: " << own;
      continue;
    }
    ++averaged;
    EXPECT_EQ(floats_of(*v0, ema), floats_of(*v0, e.name)) << "epoch 0: " << own;
    const std::vector<float> before = floats_of(*v0, ema), live = floats_of(*v1, e.name),
                             after = floats_of(*v1, ema);
    ASSERT_EQ(after.size(), live.size()) << own;
    std::vector<float> expected(live.size());
    for (std::size_t i = 0; i < live.size(); ++i) {
      const float kept = before[i] * decay, moved = live[i] * rest;
      expected[i] = kept + moved;
    }
    EXPECT_EQ(std::memcmp(after.data(), expected.data(), after.size() * sizeof(float)), 0) << own;
    EXPECT_EQ(floats_of(*ve, own), after) << "export writes the average: " << own;
    EXPECT_EQ(floats_of(*vt, own), live) << "export --weights trained: " << own;
  }
  EXPECT_GT(averaged, 4u);
}

INSTANTIATE_TEST_SUITE_P(Arithmetic, MovingAverage,
                         ::testing::Values(Determinism::kExact, Determinism::kPortable),
                         [](const auto& info) {
                           return std::string(info.param == Determinism::kExact ? "exact"
                                                                                : "portable");
                         });

// TrainerOptions::checkpoint_activations: the gpt's blocks recomputed in the backward pass train
// to the same bytes in either arithmetic, dropout and gradient groups included, with a smaller
// step peak; a model without blocks refuses it.
class Checkpointing : public ::testing::TestWithParam<Determinism> {};

TEST_P(Checkpointing, SameBytesAsThePlainBackwardAndLessActivationMemory) {
  Task task = small_task("gpt", "adamw");
  task.determinism = GetParam();
  task.model.options["layers"] = 4;
  task.gradient_groups = 2;
  TrainerOptions on;
  on.checkpoint_activations = true;
  // One after the other: an exact trainer draws from the process's generators.
  std::vector<Bytes> expected;
  {
    auto plain = Trainer::create(task);
    ASSERT_TRUE(plain.ok());
    for (int e = 1; e <= 2; ++e) {
      ASSERT_TRUE((*plain)->train_epoch().ok());
      expected.push_back(*(*plain)->snapshot());
    }
  }
  auto checkpointed = Trainer::create(task, on);
  ASSERT_TRUE(checkpointed.ok());
  for (int e = 1; e <= 2; ++e) {
    auto summary = (*checkpointed)->train_epoch();
    ASSERT_TRUE(summary.ok()) << summary.error().message;
    EXPECT_EQ(*(*checkpointed)->snapshot(), expected[e - 1]) << "epoch " << e;
  }
  // Activations large beside the weights: 4 blocks of [8, 64, 64].
  Task wide = task;
  wide.model.options["d_model"] = 64;
  wide.model.options["heads"] = 4;
  wide.model.options["seq_len"] = 64;
  wide.batch_size = 8;
  wide.gradient_groups = 1;
  auto kept = estimate(wide), recomputed = estimate(wide, on);
  ASSERT_TRUE(kept.ok() && recomputed.ok());
  EXPECT_LT(recomputed->step_peak_bytes * 2, kept->step_peak_bytes)
      << kept->step_peak_bytes << " bytes kept, " << recomputed->step_peak_bytes << " recomputed";
}

INSTANTIATE_TEST_SUITE_P(Arithmetic, Checkpointing,
                         ::testing::Values(Determinism::kExact, Determinism::kPortable),
                         [](const auto& info) {
                           return std::string(info.param == Determinism::kExact ? "exact"
                                                                                : "portable");
                         });

TEST(CheckpointingRefused, ByAModelWithoutBlocks) {
  TrainerOptions on;
  on.checkpoint_activations = true;
  auto cnn = Trainer::create(small_task("cnn", "sgd"), on);
  ASSERT_FALSE(cnn.ok());
  EXPECT_NE(cnn.error().message.find("has no blocks to checkpoint"), std::string::npos)
      << cnn.error().message;
}

}  // namespace
}  // namespace vt::training
