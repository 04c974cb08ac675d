#pragma once
// The arithmetic environment of this process (docs/environment.md): what the provider commits
// and what a verifier must reproduce for an exact-mode replay. Torch-free header.
//
// ATen chooses its CPU kernel level and oneDNN its instruction set once per process, at first
// use. So a provider measures after choosing nothing (what the machine and its environment
// variables give), and a verifier matches *before* any kernel ran: match_environment takes the
// committed levels where this machine can, and says what it cannot.

#include <map>
#include <string>
#include <vector>

#include "protocol/environment.h"
#include "protocol/task.h"
#include "training/trainer.h"

namespace vt::training {

// This process's environment for `task` trained with `options` (device, thread count). Fixes
// ATen's CPU level and oneDNN's ISA for the rest of the process.
Environment measure_environment(const Task& task, const TrainerOptions& options);

// CPU levels in ascending order, as ATEN_CPU_CAPABILITY spells them.
const std::vector<std::string>& cpu_capability_levels();

struct EnvironmentMatch {
  // Conditions of exactness this machine cannot reproduce: a replay here could differ from an
  // honest provider's bits, so the verdict is inconclusive rather than a judgement.
  std::vector<EnvironmentDifference> unmatched;
  // What was adopted, for the verdict: "replayed at ATen CPU level avx2, the level the provider
  // committed (this CPU supports up to avx512)". Empty when nothing needed adopting.
  std::string note;
  Environment here;  // this process's environment after matching
};

// For an exact-mode task: sets this process's ATen CPU level and oneDNN ISA to the committed
// ones when this CPU supports them and the verifier's own ATEN_CPU_CAPABILITY /
// ONEDNN_MAX_CPU_ISA (its highest allowed levels) permit; then compares every condition field.
// Must run before any LibTorch kernel in this process; a level fixed earlier is an internal error.
// Child processes started afterwards inherit the levels. Other modes match trivially.
Result<EnvironmentMatch> match_environment(const Environment& committed, const Task& task,
                                           const TrainerOptions& options);

// The environments this machine can replay for `task` (exact mode): each condition field with
// every value it can reproduce. What `task init --pin-environment` writes into the task.
std::map<std::string, std::vector<std::string>> replayable_environments(
    const Task& task, const TrainerOptions& options);

}  // namespace vt::training
