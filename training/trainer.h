#pragma once
// The deterministic trainer: the provider trains with it, the verifier and the auditor replay
// with it. Its state at an epoch boundary is a snapshot in canonical safetensors bytes
// (docs/snapshot.md); restoring a snapshot and training the next epoch lands on the same bytes
// as the run that produced it, given the same task, device class and intra-op thread count.
//
// Torch-free header: LibTorch stays behind the pimpl. LibTorch's thread count, generators and
// CUDA settings are the process's: a trainer of an exact or tolerance task draws from the
// process's generators (seeded or restored when it is built), so such trainers run one at a time
// in a process; portable trainers draw from veritrain's counter-based stream and may take turns.

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/safetensors.h"
#include "protocol/task.h"

namespace vt::training {

class Collective;  // training/distributed.h

struct TrainerOptions {
  std::filesystem::path task_dir = ".";  // where relative paths in the task resolve
  std::string device;                    // "" = the task's; else "cpu", "cuda", "cuda:1"
  std::int64_t intra_op_threads = 0;     // 0 = the task's
  // Off only to measure what determinism costs (bench_gpu): replays are then not bit-identical.
  bool deterministic_algorithms = true;
  // False where a restored state is read and not trained on (export): a snapshot of an exact
  // task made on another device class or thread count is then no error.
  bool restore_for_replay = true;
  // Activation checkpointing (the zoo's gpt): each block's activations recomputed in the
  // backward pass instead of kept, for the memory of a larger model or batch. The same bits
  // either way (docs/training.md, "Activation checkpointing"), so it is this process's choice,
  // not the task's.
  bool checkpoint_activations = false;
  // This process's rank among those training together (gradient_groups > 1); null = one
  // process running every group. Any W gives the same bits (docs/training.md).
  std::shared_ptr<Collective> collective;
};

struct StepMetrics {
  std::int64_t epoch = 0;
  std::int64_t step_in_epoch = 0;  // 1-based, steps done so far in this epoch
  std::int64_t steps_in_epoch = 0;
  double loss = 0.0;     // of the latest step
  double seconds = 0.0;  // since the epoch started
  double samples_per_second = 0.0;
};

class Trainer;

struct EpochHooks {
  std::int64_t progress_every = 0;  // call on_progress every N steps (0 = never)
  std::function<void(const StepMetrics&)> on_progress;
  std::int64_t trail_every = 0;  // call on_trail after every N-th step (0 = never)
  std::function<void(std::int64_t step_in_epoch, const Trainer&)> on_trail;
  // Around each step (1-based), its optimizer update included: a step trace (docs/dispute.md)
  // records one step's operator calls between the two. An on_step_end that returns false ends
  // the epoch after that step; the trainer is then mid-epoch and refuses to snapshot or train on.
  std::function<void(std::int64_t step_in_epoch)> on_step_begin;
  std::function<bool(std::int64_t step_in_epoch)> on_step_end;
};

// One parameter of the model, as the rules of optimizer.no_decay read it (training/recipes.h).
struct ParameterInfo {
  std::string name;  // the snapshot's "param/<name>" without its prefix
  std::vector<std::int64_t> shape;
  std::string module;  // the class of the module that holds it: "Linear", "LayerNorm", ...
};

// The held-out split at an epoch end, in eval mode without gradients (docs/datasets.md).
struct EvalMetrics {
  double loss = 0.0;     // mean over the split's examples
  double accuracy = -1;  // fraction of argmax hits (tokens for token models); -1 = regression
  std::int64_t examples = 0;
};

struct EpochSummary {
  std::int64_t epoch = 0;
  std::int64_t steps = 0;
  std::int64_t samples = 0;
  double mean_loss = 0.0;
  double seconds = 0.0;
  Digest data_order_digest{};
  std::optional<EvalMetrics> eval;  // when the task has an eval split
};

class Trainer {
 public:
  // A fresh state for `task` (epoch 0): the model initialised from the task seed.
  static Result<std::unique_ptr<Trainer>> create(const Task& task,
                                                 const TrainerOptions& options = {});
  // The state of a snapshot. In exact mode a snapshot of another task, thread count or device
  // class is refused; in tolerance mode it is allowed and listed in replay_notes().
  static Result<std::unique_ptr<Trainer>> restore(const Task& task, ByteSpan snapshot,
                                                  const TrainerOptions& options = {});
  // The state of a snapshot of this trainer's task, in place of the one it holds: restore's
  // checks and bytes, without building the model, optimizer and data again. A verifier replays
  // each challenged epoch in one trainer this way. After an error the state is undefined until
  // the next load succeeds.
  Status load(ByteSpan snapshot);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains epoch epoch()+1.
  Result<EpochSummary> train_epoch(const EpochHooks& hooks = {});

  // One forward pass on the first batch, checked against the task's loss (shapes, classes, a
  // scalar for loss "model"); random streams and buffers are put back, so the state is as
  // before. `train` runs it before committing epoch 0, `task check` first of all.
  Status check_model();
  // The model's own parameters and buffers under their own names (no "param/" prefix), as
  // safetensors bytes that load_state_dict reads. `averaged`: a task with optimizer.ema_decay
  // exports its moving average of them (integer buffers as they are); false, the trained ones.
  Result<Bytes> export_safetensors(bool averaged = true) const;
  // The user's TorchScript module with the current parameters and buffers (`averaged` as above);
  // torchscript tasks only.
  Status export_torchscript(const std::filesystem::path& file, bool averaged = true) const;
  // The task keeps a moving average of the weights (optimizer.ema_decay).
  bool averages_weights() const;

  // Canonical snapshot bytes of the current state.
  Result<Bytes> snapshot() const;
  // The same into `out`, reusing its memory: a provider capturing every epoch writes the pages
  // it already has instead of faulting in and zero-filling a fresh state-sized buffer.
  Status snapshot_into(Bytes& out) const;
  // The snapshot snapshot_into would write, read from the live state a range at a time, for a
  // commitment that streams it instead of holding a copy. It reads the tensors as they are when
  // read: valid until the state next changes (the next step, restore or load).
  class CanonicalSource {
   public:
    virtual ~CanonicalSource() = default;
    virtual const CanonicalLayout& layout() const = 0;
    // Canonical bytes [offset, offset + out.size()).
    virtual Status read(std::uint64_t offset, std::span<std::uint8_t> out) const = 0;
  };
  Result<std::unique_ptr<CanonicalSource>> canonical_source() const;
  // Names, dtypes and shapes of the snapshot's tensors, sorted by name (what fingerprint
  // positions are drawn over).
  std::vector<TensorEntry> layout() const;
  // Raw little-endian values of tensor `name` at flat `indices`, gathered where the state lives
  // (on the GPU for CUDA tasks) with one copy to the host.
  Result<Bytes> gather(std::string_view name, std::span<const std::uint64_t> indices) const;
  struct GatherRequest {
    std::string_view name;
    std::span<const std::uint64_t> indices;
  };
  // Many tensors at once: one copy of all indices to the device and one copy back per dtype,
  // however many tensors are asked for (a fingerprint samples every tensor).
  Result<std::vector<Bytes>> gather_many(std::span<const GatherRequest> requests) const;

  std::int64_t epoch() const;
  std::int64_t global_step() const;
  std::int64_t steps_per_epoch() const;
  std::int64_t dataset_size() const;  // examples
  std::int64_t parameter_count() const;
  std::vector<ParameterInfo> parameter_info() const;     // in the model's order
  std::string device() const;                            // "cpu" or "cuda:0"
  const std::vector<std::string>& replay_notes() const;  // tolerance-mode differences

  struct Impl;  // defined in trainer.cpp; opaque everywhere else

 private:
  explicit Trainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// How many trainers this process has built (create and restore; load builds none): what a
// verify keeps to one per process.
std::uint64_t trainers_built();

// Snapshot metadata keys (docs/snapshot.md).
inline constexpr const char* kSnapshotFormat = "veritrain/snapshot/v1";

}  // namespace vt::training
