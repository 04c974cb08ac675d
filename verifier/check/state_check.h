#pragma once
// What a fetched committed state must satisfy beyond its root (docs/verifier.md, "Everything
// committed is checked"), and the context every check of a task shares: the task, the trainer
// settings of its replays and the tensor layout its states must have.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/safetensors.h"
#include "fingerprint/sampling.h"
#include "protocol/log.h"
#include "protocol/task.h"
#include "training/trainer.h"
#include "verifier/source/source.h"

namespace vt::verifier {

class ScratchFolder;

// When the committed state after a challenged epoch is fetched. In exact mode a replay whose
// root equals the committed root has proven that state byte for byte, so by default it is fetched
// only when it is needed anyway: the next challenged epoch starts from it (or it is the final
// model), the task compares by tolerance, or the replay missed the root (the state is evidence).
enum class FetchAfter { kAuto, kAlways, kNever };

struct CheckContext {
  const Task* task = nullptr;
  Digest task_id{};
  training::TrainerOptions trainer;
  FetchAfter fetch_after = FetchAfter::kAuto;  // kNever: `--fingerprint-only`
  // The tensors (name, dtype, shape) of every state the task defines, from the verifier's own
  // initial state: what fingerprint positions are drawn over and what a snapshot must hold.
  std::vector<TensorEntry> layout;
  std::int64_t steps_per_epoch = 0;
  // A veritrain binary whose `replay-worker` re-runs an epoch that missed its commitment, in a
  // fresh process (second_replay.h). Empty: the second replay runs in this process.
  std::filesystem::path second_replay_program = {};
  // The trainer this process replays in: built once (the one that derived the task's initial
  // state), each challenged epoch's start state loaded into it (Trainer::load). Null: each
  // replay restores a trainer of its own.
  std::shared_ptr<training::Trainer> replayer = {};
  // Where replayed states wait to be judged and parallel replays exchange theirs (scratch.h).
  // Null: replayed states stay in memory.
  std::shared_ptr<ScratchFolder> scratch = {};
  std::uint64_t large_state_bytes = kLargeStateBytes;  // VerifyOptions::large_state_bytes
};

// A context for `task` with its layout derived here (builds the task's initial state once, in
// the trainer it keeps as `replayer`).
Result<CheckContext> make_check_context(const Task& task, const training::TrainerOptions& trainer,
                                        FetchAfter fetch_after = FetchAfter::kAuto);

// The tensor list of a canonical snapshot: names, dtypes and shapes.
std::vector<TensorEntry> layout_of(const SafetensorsView& view);

// What a fetched state must satisfy beyond its root (docs/verifier.md, "Everything committed is
// checked"): metadata that agrees with the task and the epoch, the task's tensor list, and the
// committed fingerprint and tracking fingerprint recomputed from its own bytes at the positions
// the task, the epoch and its root derive. Returns what is wrong, one item each; the caller names
// the epoch.
std::vector<std::string> check_committed_state(ByteSpan canonical, const SignedRecord& record,
                                               const CheckContext& ctx);

// The commitment fingerprint plan the task derives for `record` (k from the task, positions from
// its root, tensors from the task's layout).
Result<fp::SamplePlan> expected_commitment_plan(const CheckContext& ctx,
                                                const CommitRecord& record);

}  // namespace vt::verifier
