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
  // What the process holds besides: resident besides its tensors once it trained two steps
  // (LibTorch's and veritrain's code the steps touched, their static buffers, a TorchScript
  // module's compiled graphs, data kept outside tensors; at least what was resident before the
  // trainer was built), and allocated between steps (parameters, gradients kept, optimizer
  // state, buffers, in-memory data).
  std::uint64_t process_bytes = 0;
  std::uint64_t resting_bytes = 0;
  std::string peak_source;  // how step_peak_bytes was measured
  // A step runs its gradient groups one at a time (docs/training.md), so step_peak_bytes is
  // what one group of examples_per_group needs, plus the tree's partial sums.
  std::int64_t gradient_groups = 1;
  std::int64_t examples_per_group = 0;
  double step_seconds = 0.0;
  std::int64_t steps_per_epoch = 0;
  std::string device;
};

Result<MemoryEstimate> estimate(const Task& task, const TrainerOptions& options = {});

// A predicted peak resident set, by named part (docs/training.md, "Memory").
struct PeakPart {
  std::string name;
  std::uint64_t bytes = 0;
};
struct PeakPrediction {
  std::vector<PeakPart> parts;
  std::uint64_t total() const {
    std::uint64_t sum = 0;
    for (const PeakPart& p : parts) sum += p.bytes;
    return sum;
  }
};
// The parts every training process has at a step's peak, plus `extra` (what the role holds
// beside: a provider's commitment buffers, a replay's states).
PeakPrediction training_peak(const MemoryEstimate& e, std::vector<PeakPart> extra);

}  // namespace vt::training
