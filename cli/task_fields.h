#pragma once
// `task init` flags for the optimizer, schedule and loss fields, and `task show`'s listing of
// every field. Kept apart from cmd_task.cpp so that the data flags there stay a separate edit.

#include <cmath>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/app.h"
#include "protocol/task.h"

namespace vt::cli {

// NaN / negative = not given: the chosen optimizer's or schedule's default stays.
struct HyperArgs {
  double momentum = NAN, weight_decay = NAN, beta1 = NAN, beta2 = NAN, eps = NAN;
  bool nesterov = false;
  double min_lr = NAN, gamma = NAN;
  std::int64_t warmup_steps = -1, step_size = -1, tracking_k = -1;
  std::string loss;
  // Recipes (docs/task.md, "Recipes"). no_decay is a rule the model resolves (task_init.h).
  double clip_grad_norm = NAN, label_smoothing = NAN, ema_decay = NAN;
  std::string clip_norm, no_decay;
  std::int64_t crop_padding = -1;
  std::string padding_mode;
  bool flip = false;
};

void add_hyper_options(CLI::App* init, HyperArgs& args);
// Writes the given flags over the task's defaults; validate_task judges the result.
void apply_hyper_args(const HyperArgs& args, Task& task);

// `task check` and its hidden worker `task check-steps-worker` (cmd_task_check.cpp).
void register_task_check(CLI::App* task, Context& ctx);

// Every field of the task, one "path value" line each, in canonical order.
std::string describe_task(const Task& task);

}  // namespace vt::cli
