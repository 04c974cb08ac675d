#pragma once
// `veritrain estimate`: what a task costs per check, measured by running one training step
// rather than computed by hand (a count by hand misses workspaces and allocator overhead; this
// measures).

#include "training/trainer.h"

namespace vt::training {

struct MemoryEstimate {
  std::int64_t parameters = 0;
  std::uint64_t parameter_bytes = 0;
  std::uint64_t optimizer_state_bytes = 0;  // the optimizer's slots and the weights' average
  std::uint64_t snapshot_bytes = 0;         // raw canonical bytes of one snapshot
  std::uint64_t step_peak_bytes = 0;  // peak allocated during one step, above the resting state
  std::string peak_source;            // how step_peak_bytes was measured
  // A step runs its gradient groups one at a time (docs/training.md), so step_peak_bytes is
  // what one group of examples_per_group needs, plus the tree's partial sums.
  std::int64_t gradient_groups = 1;
  std::int64_t examples_per_group = 0;
  double step_seconds = 0.0;
  std::int64_t steps_per_epoch = 0;
  std::string device;
};

Result<MemoryEstimate> estimate(const Task& task, const TrainerOptions& options = {});

}  // namespace vt::training
