#pragma once
// A test-only cheating provider. It writes a complete workdir (task.json, a signed, hash-chained
// commitments.log, stored snapshots) exactly as an honest provider would, except that on chosen
// epochs it applies a strategy. It works only with snapshot bytes and public APIs - no hooks
// into product code - so everything it does, a real cheater could do: to train with another
// hyperparameter it rewrites the snapshot's metadata to a modified task's id, restores with that
// task, trains and rewrites the metadata back. Every commitment is computed honestly from the
// bytes it commits (root, fingerprint at positions from that root, tracking fingerprint, trail),
// and it always claims the data-order digest the task defines, so no cheat is caught by a lie
// that is cheaper to avoid than to tell.
//
// Never linked into the veritrain binary (tests/adversary/CMakeLists.txt).

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "fingerprint/sampling.h"
#include "protocol/keys.h"
#include "protocol/task.h"
#include "training/trainer.h"

namespace vt::adversary {

enum class Strategy {
  kHonest,
  kSkipEpoch,     // 1 re-commit the previous state, epoch/global_step metadata advanced
  kFewerSteps,    // 2 train a third of the steps (at least one fewer)
  kLearningRate,  // 3 train the epoch with twice the learning rate
  kDataOrder,     // 4 train with the next epoch's example order
  kNoise,         // 5 honest epoch, then relative noise on every parameter
  kForge,         // 6 a cheap state patched with honest values at root-derived positions
  kBreakChain,    // 7 train the epoch from the state committed for epoch e-2
  kReplayOld,     // 8 re-commit the transition of an earlier epoch (cyclic buffer of 2)
  kLowPrecision,  // 9 train the epoch under bf16 autocast, commit as fp32
  kDropBatch,     // 10 skip the epoch's last batch
  kForgedStart,   // epoch 0 only: commit a state not derived from the task's seed
  // A recipe skipped (docs/task.md, "Recipes"): the epoch trained without the task's gradient
  // clipping, with weight decay on every parameter, without label smoothing, or without the
  // weights' average moving.
  kSkipClipping,
  kDecayEverything,
  kSkipSmoothing,
  kSkipAugmentation,  // the epoch's images as stored, not cropped and flipped
  kFrozenAverage,     // the weights' moving average left as the epoch found it (decay ~1)
};

// The ten cheating strategies of docs/reliability.md, in its order.
const std::vector<Strategy>& epoch_strategies();
// The four recipe cheats, for a task with every recipe on (support.h's recipe_task); the
// augmentation cheat needs images (image_recipe_task).
const std::vector<Strategy>& recipe_strategies();
std::string strategy_name(Strategy s);  // "skip_epoch", ...

struct CheatPlan {
  std::map<std::uint64_t, Strategy> cheats;  // epoch -> strategy; other epochs are honest
  double noise = 1e-3;                       // kNoise: relative L2 size per tensor
  std::uint64_t noise_seed = 1;
};

struct CheatRun {
  std::filesystem::path workdir;
  std::vector<Digest> roots;  // committed root per epoch, 0..N
};

// Writes a fresh workdir for `task` in `dir` (created; must not hold another task), signing with
// `key`. The trainer options (thread count) are the provider's.
Result<CheatRun> write_workdir(const Task& task, const std::filesystem::path& dir,
                               const CheatPlan& plan, const SigningKey& key,
                               const training::TrainerOptions& options = {});

// --- byte-level tools a cheater has (also used by the tests) ---

// The same tensors with `changes` applied to __metadata__ (a key mapped to "" is kept as is).
Result<Bytes> rewrite_metadata(ByteSpan snapshot,
                               const std::map<std::string, std::string>& changes);

// Every F32 tensor named param/... gets noise of relative L2 size `relative` (deterministic in
// `seed`); all other tensors and the metadata are kept.
Result<Bytes> add_noise(ByteSpan snapshot, double relative, std::uint64_t seed);

// Strategy 6: copies `honest`'s values into `cheap` at the positions that a commitment of `cheap`
// itself would sample (commitment_seed(task_id, epoch, root(cheap)), k). Returns the forged bytes
// and those positions: had positions not depended on the final root, the forge would match the
// honest fingerprint there.
struct Forgery {
  Bytes bytes;
  fp::SamplePlan known_plan;
};
Result<Forgery> forge_snapshot(ByteSpan cheap, ByteSpan honest, const Digest& task_id,
                               std::uint64_t epoch, std::uint64_t k);

}  // namespace vt::adversary
