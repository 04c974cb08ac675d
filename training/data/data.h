#pragma once
// Datasets as plain arrays (no LibTorch): deterministic synthetic generators and readers for
// MNIST idx and CIFAR-10 binary files whose SHA-256 the task pins. The trainer moves a dataset
// to the device once and indexes batches there.

#include <filesystem>
#include <vector>

#include "protocol/task.h"
#include "training/zoo/sizes.h"
#include "training/zoo/zoo.h"

namespace vt::training {

struct Dataset {
  std::int64_t size = 0;                    // examples
  std::vector<std::int64_t> input_shape;    // per example
  std::vector<std::int64_t> target_shape;   // per example; empty = a scalar class label
  std::vector<float> inputs;                // size * prod(input_shape), unless tokens
  std::vector<std::int64_t> token_inputs;   // token models: size * seq_len
  std::vector<float> float_targets;         // mse targets
  std::vector<std::int64_t> class_targets;  // class labels, or next tokens for token models

  bool tokens() const { return !token_inputs.empty(); }
};

// Builds or reads the task's dataset; files are resolved against `task_dir` and their SHA-256
// checked against the task before a byte is used.
Result<Dataset> load_dataset(const TrainingTask& task, const std::filesystem::path& task_dir);

// The example order of one epoch: enough passes of per-(seed, epoch, pass) permutations for
// `steps * batch` examples. Never std::shuffle (docs/snapshot.md, "Determinism"). An empty
// dataset is invalid input (no pass could ever fill the order).
Result<std::vector<std::int64_t>> epoch_order(std::uint64_t seed, std::int64_t epoch,
                                              std::int64_t dataset_size, std::int64_t steps,
                                              std::int64_t batch);

// SHA-256 over the order's indices as u64le: what the commitment names as data_order_digest.
Digest order_digest(const std::vector<std::int64_t>& order);

// What one pass of a loaded dataset is, for check_sizes (training/zoo/sizes.h).
DataShape resident_shape(const Dataset& data);

}  // namespace vt::training
