#pragma once
// A requestor's TorchScript module as a Network (docs/models.md). LibTorch types: for training/
// alone.

#include <filesystem>
#include <memory>

#include "protocol/task.h"
#include "training/model/network.h"

namespace vt::training {

// The task's TorchScript module (model.path under `task_dir`, checked against model.sha256),
// rewritten onto portable operators in portable arithmetic; modules that change non-tensor
// attributes are refused.
Result<std::unique_ptr<Network>> load_torchscript(const Task& task,
                                                  const std::filesystem::path& task_dir);

}  // namespace vt::training
