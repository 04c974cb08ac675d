// `veritrain task` in veritrain-torch: task init for any model and data (cli/task_init.h), task
// show and task check.
#include "cli/app.h"
#include "cli/task_fields.h"
#include "cli/task_init.h"
#include "training/environment.h"
#include "training/recipes.h"
#include "training/trainer.h"

namespace vt::cli {
namespace {

// Builds the model on its data, runs one forward pass (a model that cannot run on the data is no
// task) and counts what the fingerprint samples.
Result<training::StateCount> build_and_count(const Task& task) {
  training::TrainerOptions probe;
  probe.device = "cpu";  // the layout does not depend on the device
  VT_ASSIGN_OR_RETURN(auto trainer, training::Trainer::create(task, probe));
  VT_RETURN_IF_ERROR(trainer->check_model());
  training::StateCount count;
  for (const TensorEntry& t : trainer->layout()) {
    if (!is_floating(t.dtype) || t.numel() == 0) continue;
    ++count.tensors;
    count.elements += t.numel();
  }
  return count;
}

// Paths in the task resolve as build_and_count's do: task init writes them as given.
Result<std::vector<std::string>> resolve_no_decay_here(const Task& task, const std::string& rule) {
  training::TrainerOptions probe;
  probe.device = "cpu";  // names and shapes do not depend on the device
  VT_ASSIGN_OR_RETURN(auto trainer, training::Trainer::create(task, probe));
  return training::resolve_no_decay(rule, trainer->parameter_info());
}

Environments replayable_here(const Task& task, const std::filesystem::path& task_dir) {
  training::TrainerOptions here;
  here.task_dir = task_dir;
  return training::replayable_environments(task, here);
}

}  // namespace

void register_task(CLI::App& app, Context& ctx) {
  auto* task = app.add_subcommand("task", summary_of("task"));
  task->require_subcommand(1);
  register_task_init(*task, ctx,
                     {nullptr, nullptr, build_and_count, replayable_here, resolve_no_decay_here});
  register_task_show(*task, ctx);  // cmd_task_show.cpp: torch-free, so `veritrain` runs it itself
  register_task_check(task, ctx);
}

}  // namespace vt::cli
