#pragma once
// The zoo's models (mlp, cnn, conv3d, gpt) as LibTorch modules behind Network. LibTorch types:
// for training/ alone.

#include <memory>

#include "protocol/task.h"
#include "training/model/network.h"

namespace vt::training {

// The task's zoo model with its resolved `model_options`, initialised from the current default
// generator (seeded by the caller). A torchscript task is training/script/module.h's.
Result<std::unique_ptr<Network>> make_zoo_network(const Task& task, const Options& model_options);

}  // namespace vt::training
