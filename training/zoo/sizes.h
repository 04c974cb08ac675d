#pragma once
// The sizes a task names, checked against its data and this machine's memory before anything is
// allocated for training (docs/training.md, "Sizes"): batch_size, steps_per_epoch, epochs,
// intra_op_threads, the model's and the synthetic dataset's options, and the fingerprint's k,
// tracking_k and trail_interval. A size that cannot be trained here is an input error that names
// its field and the most it could be, never a failed allocation or an overflow halfway into
// training. Every Trainer runs check_sizes before it builds anything (`train`, `task check`,
// `verify`, `audit`, `estimate`); what the model's layout decides, check_fingerprint_sizes, runs
// where a run commits: `train` before epoch 0, `task check` last.
//
// Memory is bounded from below: the model's state, the data held in memory, the epoch's example
// order and one step's inputs, targets and activations, each counted at no more than it takes.
// A task refused here cannot train on this machine; one accepted may still need more than the
// bound (LibTorch's workspaces, the allocator's slack).

#include <cstdint>
#include <span>
#include <string>

#include "common/safetensors.h"
#include "protocol/task.h"
#include "training/zoo/zoo.h"

namespace vt::training {

// What one pass of the training split is, before a byte of it is loaded for training.
struct DataShape {
  std::int64_t examples = 0;
  std::uint64_t input_bytes = 0;   // one example's inputs, as the model takes them
  std::uint64_t target_bytes = 0;  // one example's targets
  bool resident = false;           // held whole in memory (built-in data), not memory-mapped
  std::int64_t permuted = 0;       // positions each pass permutes (0: token windows, drawn)
};

// The synthetic dataset load_dataset would generate for `resolved`, from its options alone. A
// dataset already loaded or memory-mapped: resident_shape (training/data/data.h), mapped_shape
// (training/data/mapped_data.h).
DataShape synthetic_shape(const TrainingTask& resolved);

// The product of `factors` (a negative one counts as 0) and `scale`, saturating at 2^64 - 1: a
// size past 2^64 bytes is only ever compared against memory.
std::uint64_t saturating_product(std::span<const std::int64_t> factors, std::uint64_t scale = 1);

// Bytes this process can hold: physical memory, lowered by a cgroup limit or RLIMIT_AS.
std::uint64_t usable_memory();

// Parameters of the task's zoo model (its row's arithmetic over the resolved options); 0 for a
// TorchScript module, whose size is its file's.
std::uint64_t zoo_parameter_count(const TrainingTask& resolved);

// The floating-point tensors of a zoo model's training state and their elements, as
// Trainer::layout() lists them: the parameters, BatchNorm's running statistics and the
// optimizer's slots (step counters, BatchNorm's batch counts and generator states are integers).
// What fingerprint.k must cover (docs/fingerprint.md), known without building the model.
struct StateCount {
  std::uint64_t tensors = 0;
  std::uint64_t elements = 0;  // saturates at 2^64 - 1
};
StateCount zoo_state_count(const TrainingTask& resolved);

// What Trainer::create checks of a zoo model on synthetic data before it builds anything (the
// task's options, the model's fit to the dataset, its sizes against this machine's memory), and
// the state it would then hold: `task init` in the light `veritrain`, without LibTorch. A zoo
// model always runs on the synthetic data made for it, so no forward pass is needed to know
// that; any other model or dataset is an internal error here.
Result<StateCount> synthetic_zoo_state(const Task& task);
// Whether synthetic_zoo_state measures a task of this model and dataset: a zoo model on synthetic
// data.
bool counted_without_building(const std::string& model, const std::string& dataset);

// Steps in one epoch: the task's steps_per_epoch, or one full pass (partial batch dropped).
std::int64_t steps_per_epoch(const Task& task, std::int64_t dataset_size);

struct TaskSizes {
  std::int64_t steps = 0;         // per epoch
  std::uint64_t memory = 0;       // held at once while training, at least
  std::uint64_t total_steps = 0;  // steps × epochs
};

// Every size of `resolved` against its data and `memory` bytes; errors name the field.
Result<TaskSizes> check_sizes(const TrainingTask& resolved, const DataShape& data,
                              std::uint64_t memory);

// A process with LibTorch loaded, at least: one rank of the smallest mlp task held 179 MiB here
// (LibTorch 1.13, CPU).
inline constexpr std::uint64_t kRankProcessBytes = std::uint64_t{128} << 20;

// `ranks` processes of `task` on this machine, each with LibTorch and the model's whole state,
// against `memory`; `field` is what set the count (world_size, --nproc).
Status check_local_ranks(const TrainingTask& task, std::int64_t ranks, const std::string& field,
                         std::uint64_t memory);

// fingerprint.k and tracking_k against the training state's `layout` (what plan_samples draws
// from), and the record an epoch of `steps` commits - its fingerprint, tracking fingerprint and
// one trail fingerprint every trail_interval steps - against kMaxRecordBytes, the most a verifier
// reads of one record.
Status check_fingerprint_sizes(const Task& task, std::int64_t steps,
                               std::span<const TensorEntry> layout);

// The most bytes one record of an honest run of `task` takes (epochs of `steps` steps, a state
// of `layout`): its fingerprints and trail as check_fingerprint_sizes counts them, and the
// largest environment a record may carry; never more than kMaxRecordBytes. What a verifier
// reads of one record of that task.
std::uint64_t record_bytes_bound(const Task& task, std::int64_t steps,
                                 std::span<const TensorEntry> layout);

}  // namespace vt::training
