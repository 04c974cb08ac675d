#pragma once
// Datasets read through memory maps, never whole (docs/datasets.md):
//   tensors  safetensors files holding `inputs` and `targets`, first dimension = examples;
//            several files are shards, concatenated in file-name order.
//   tokens   flat little-endian u16 or u32 token files; an example is a window of context + 1
//            tokens: inputs are its first `context`, targets the same shifted by one.
// Every file is pinned by SHA-256 in the task and checked before a byte of it is used. The
// files are the requestor's input and, on the verifier's side, arrive beside the provider's
// claims: every offset is bounded against the mapped size before it is read.
//
// Torch-free: rows come out as raw bytes in their stored dtype; training/ makes tensors of them.

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/mapped_file.h"
#include "common/safetensors.h"
#include "protocol/task.h"
#include "training/zoo/sizes.h"
#include "training/zoo/zoo.h"

namespace vt::training {

struct Column {
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;  // per example
  std::size_t row_bytes() const;
};

class MappedDataset {
 public:
  // The task's dataset from the pinned `files` (name -> SHA-256) inside `dir`; `split` ("train",
  // "eval") names the split in messages.
  static Result<std::unique_ptr<MappedDataset>> open(
      const TrainingTask& task, const std::filesystem::path& dir,
      const std::map<std::string, std::string>& files, const std::string& split);

  bool windowed() const { return context_ > 0; }
  // Examples in one pass: rows, or disjoint windows for token files (steps per epoch).
  std::int64_t examples() const { return examples_; }
  // The range an index of the epoch order lies in: rows, or window start offsets.
  std::int64_t positions() const { return positions_; }
  const Column& inputs() const { return inputs_; }
  const Column& targets() const { return targets_; }
  const std::string& split() const { return split_; }

  // Restricts rows to `rows` (ascending, each < positions()), renumbered 0..n-1: a PRNG-chosen
  // held-out fraction takes some rows, training the rest. Not for windowed data.
  void select(std::vector<std::int64_t> rows);

  // The examples an evaluation visits, in order: every row, or the disjoint windows at
  // 0, context + 1, 2 (context + 1), ... of each token file.
  std::vector<std::int64_t> eval_order() const;

  // Raw rows of `indices` (examples, or window offsets) into two buffers of
  // indices.size() * row_bytes() each. Token values are checked against `token_limit` (> 0).
  Status gather(std::span<const std::int64_t> indices, std::uint8_t* inputs_out,
                std::uint8_t* targets_out, std::int64_t token_limit = 0) const;

  // Every class id of a `tensors` dataset lies in [0, classes): checked once at open so a bad
  // label is named before epoch 0 is committed (targets are small beside inputs).
  Status check_class_targets(std::int64_t classes) const;
  // The largest class id (I64 targets of `tensors`) or token id (`tokens`), for `task init` to
  // size a model's classes or vocabulary from the data; nullopt for other targets or no data.
  std::optional<std::int64_t> largest_class_target() const;

 private:
  struct Shard {
    MappedFile file;
    std::int64_t first = 0;    // global index of its first example (or window position)
    std::int64_t count = 0;    // its examples (or window positions)
    ByteSpan inputs, targets;  // tensors: the two tensors' data; tokens: inputs = all tokens
  };
  Status open_tensors(std::vector<MappedFile> files);
  Status open_tokens(std::vector<MappedFile> files, std::int64_t context, std::int64_t token_bytes);
  const Shard& shard_of(std::int64_t index) const;
  Status gather_window(std::int64_t offset, std::int64_t* in, std::int64_t* out,
                       std::int64_t limit) const;

  std::string split_;
  std::vector<Shard> shards_;
  Column inputs_, targets_;
  std::int64_t examples_ = 0;
  std::int64_t positions_ = 0;
  std::int64_t context_ = 0;        // tokens only
  std::int64_t token_bytes_ = 0;    // tokens only: 2 or 4
  std::vector<std::int64_t> rows_;  // after select(): example -> row; empty = identity
};

// The example order of one epoch over a mapped dataset: epoch_order's permutations for rows;
// window offsets drawn uniformly with replacement for token files (a permutation of every
// offset of a 2 GB file would itself take gigabytes). Both come from the project's Prng.
Result<std::vector<std::int64_t>> mapped_order(const MappedDataset& data, std::uint64_t seed,
                                               std::int64_t epoch, std::int64_t steps,
                                               std::int64_t batch);

// The rows of a `rows`-example dataset held out by eval_fraction: a prefix of a permutation
// drawn from the task seed on its own stream, sorted. At least one row, and at least one left.
std::vector<std::int64_t> held_out_rows(std::uint64_t seed, std::int64_t rows, double fraction);

// Shapes and dtypes of a mapped dataset against the task's model (built-in models; a
// TorchScript model gets its inputs as stored and is checked by running it). Messages name
// the expected and the actual value.
Status check_against_model(const TrainingTask& task, const MappedDataset& data);

// What one pass of a mapped dataset is as `task`'s model takes it, for check_sizes
// (training/zoo/sizes.h).
DataShape mapped_shape(const MappedDataset& data, const TrainingTask& resolved);

}  // namespace vt::training
