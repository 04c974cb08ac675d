#pragma once
// `plan`'s flags and what they ask of the planner, shared by the light `veritrain` (plan --cost:
// nothing measured) and veritrain-torch (plan without --cost measures a step and the codec), so
// the two spellings of one command cannot drift apart. Torch-free.

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "protocol/task.h"
#include "verifier/policy/cost_plan.h"

namespace vt::cli {

struct PlanArgs {
  std::string task, fetch_after = "auto";
  std::uint64_t epochs = 0;
  double confidence = 0.99, cheat_fraction = 0.1, check_probability = 0.0, reward = -1,
         penalty = -1, cost = -1;
  bool policy_given = false;  // --confidence or --cheat-fraction was on the line
};

// Adds the `plan` subcommand with every flag; the caller sets its callback.
CLI::App* add_plan_command(CLI::App& app, PlanArgs& args);
// The planner's inputs from the flags: everything but the measured estimate and codec ratio.
verifier::PlanInputs plan_inputs(const Task& task, const PlanArgs& args);

}  // namespace vt::cli
