#pragma once
// Internal to training/: the models behind one small interface. Includes ATen; never include
// this from a public header.

#include <ATen/ATen.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "protocol/task.h"

namespace vt::training {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class Network {
 public:
  virtual ~Network() = default;
  virtual at::Tensor forward(const at::Tensor& input) = 0;
  // Stable names and order: the snapshot's "param/<name>" and "buffer/<name>" tensors.
  virtual NamedTensors parameters() = 0;
  virtual NamedTensors buffers() = 0;
  virtual void to(const at::Device& device) = 0;
  virtual void set_training(bool training) = 0;
};

// Builds the task's model, initialised from the current default generator (seeded by the
// caller). Errors (bad TorchScript file, digest mismatch) come back as Result.
Result<std::unique_ptr<Network>> make_network(const Task& task, const Options& model_options,
                                              const std::filesystem::path& task_dir);

// The task's loss of `output` against `target` (cross_entropy flattens token dimensions).
at::Tensor compute_loss(const std::string& loss, const at::Tensor& output, const at::Tensor& target);

}  // namespace vt::training
