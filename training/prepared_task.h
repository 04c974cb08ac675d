#pragma once
// A task as one process runs it, worked out once (docs/architecture.md, "A task, typed and
// resolved once"): checked for training, its options and zoo rows resolved, its id, and the run
// settings - threads and device - by the one rule every command uses. The trainer is built from
// it and keeps it (Trainer::prepared()), so the provider, the verifier and its replay workers
// read these facts from one place. Torch-free.

#include <string>

#include "protocol/task.h"
#include "training/trainer.h"
#include "training/zoo/zoo.h"

namespace vt::training {

// The intra-op thread count of a run: the options' (--threads), else the task's.
std::int64_t run_threads(const Task& task, const TrainerOptions& options);
// The device of a run, as LibTorch names it ("cpu", "cuda", "cuda:1"): the options', else the
// task's device class.
std::string run_device(const Task& task, const TrainerOptions& options);

struct PreparedTask {
  TrainingTask resolved;  // the task, its options with every default, its zoo rows
  Digest id{};            // task_id(task)
  std::int64_t threads = 1;
  std::string device;
  const Task& task() const { return resolved.task; }
};

// Everything resolve_for_training checks, then the id and the run settings.
Result<PreparedTask> prepare_task(const Task& task, const TrainerOptions& options);

}  // namespace vt::training
