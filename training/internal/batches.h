#pragma once
// Internal to training/: batches of a memory-mapped dataset as tensors on the training device.
// Includes ATen; never include this from a public header.

#include <ATen/ATen.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "training/data/mapped_data.h"
#include "training/model/network.h"
#include "training/trainer.h"

namespace vt::training {

// The shape of `n` samples of `shape`: {n, shape...}.
std::vector<std::int64_t> batched(std::int64_t n, const std::vector<std::int64_t>& shape);

struct MappedSplit {
  std::unique_ptr<MappedDataset> data;
  // Built-in models take f32 features or i64 token ids; a TorchScript module gets the stored
  // dtype (docs/datasets.md, "What the model receives").
  std::optional<at::ScalarType> input_type;
  std::int64_t token_limit = 0;  // gpt: the vocabulary every token id must lie below

  // Rows `indices` as (inputs, targets) on `device`.
  Result<std::pair<at::Tensor, at::Tensor>> batch(std::span<const std::int64_t> indices,
                                                  const at::Device& device) const;
};

// A training batch `x` ([n, C, H, W] f32) augmented as dataset.augment says (data/augment.h), its
// row i the example at `first_position + i` of epoch `epoch`'s order; on x's device.
at::Tensor augment_batch(const at::Tensor& x, const Task& task, std::int64_t epoch,
                         std::int64_t first_position);

// dataset.augment's fit to examples of `shape` as the model receives them (f32 [C, H, W]).
Status check_augmentable_input(const Task& task, const std::vector<std::int64_t>& shape,
                               bool float_input);

// The task's eval split, if it has one: its eval_files opened as a split of their own, or the
// eval_fraction of `train`'s rows that held_out_rows picks, which `train` then no longer holds.
Result<std::optional<MappedSplit>> open_eval_split(const TrainingTask& resolved,
                                                   const std::filesystem::path& task_dir,
                                                   MappedSplit& train);

// Loss (and accuracy for class targets) of `net` over `split`, in eval mode without gradients,
// in batches of the task's batch size; the network is back in training mode afterwards.
Result<EvalMetrics> evaluate_split(Network& net, const MappedSplit& split, const Task& task,
                                   const at::Device& device);

// Opens, digest-checks and shape-checks one split (`files` from the task) against the model.
Result<MappedSplit> open_mapped_split(const TrainingTask& resolved,
                                      const std::filesystem::path& task_dir,
                                      const std::map<std::string, std::string>& files,
                                      const std::string& split);

}  // namespace vt::training
