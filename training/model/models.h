#pragma once
// The zoo's models (mlp, cnn, conv3d, gpt) as LibTorch modules behind Network. LibTorch types:
// for training/ alone.

#include <memory>

#include "protocol/task.h"
#include "training/model/network.h"
#include "training/zoo/zoo.h"

namespace vt::training {

// The task's zoo model (its row's kind) with its resolved options, initialised from the current
// default generator (seeded by the caller). A user module is training/script/module.h's.
Result<std::unique_ptr<Network>> make_zoo_network(const TrainingTask& resolved);

}  // namespace vt::training
