#pragma once
// The default task of a zoo model on synthetic data, cut to one epoch of two steps: the smallest
// task the size checks of sizes_test.cpp and sizes_trainer_test.cpp start from.
#include <string>

#include "protocol/task.h"
#include "training/zoo/zoo.h"

namespace vt::training {

inline Task synthetic_task(const std::string& model) {
  Task task = *default_task(model, "synthetic");
  task.epochs = 1;
  task.steps_per_epoch = 2;
  return task;
}

}  // namespace vt::training
