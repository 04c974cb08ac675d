// `veritrain plan` with LibTorch: how often to challenge and what it costs, with the per-check
// bytes and replay time measured on the task itself (plan_light.cpp has the --cost-only form).
#include <spdlog/spdlog.h>

#include <filesystem>

#include "cli/app.h"
#include "cli/plan_args.h"
#include "compression/container.h"
#include "protocol/environment.h"
#include "training/environment.h"
#include "training/estimate.h"
#include "training/runtime.h"
#include "verifier/policy/cost_plan.h"

namespace vt::cli {
namespace {
namespace fs = std::filesystem;

// The planner's bytes per check come from the codec's ratio on this task's own state after a
// couple of steps (momentum and moments filled in), not from a table.
Result<double> measured_codec_ratio(const Task& task, const training::TrainerOptions& t) {
  Task short_task = task;
  short_task.steps_per_epoch = 2;
  VT_ASSIGN_OR_RETURN(auto trainer, training::Trainer::create(short_task, t));
  VT_RETURN_IF_ERROR(trainer->train_epoch());
  VT_ASSIGN_OR_RETURN(Bytes canonical, trainer->snapshot());
  comp::EncodeOptions enc;
  enc.threads = 0;
  VT_ASSIGN_OR_RETURN(Bytes container, comp::encode(canonical, enc));
  return static_cast<double>(container.size()) / static_cast<double>(canonical.size());
}

Result<int> run_plan(Context& ctx, const PlanArgs& a) {
  VT_ASSIGN_OR_RETURN(Task task, load_task(a.task));
  training::TrainerOptions t;
  t.task_dir = fs::path(a.task).parent_path();
  verifier::PlanInputs in = plan_inputs(task, a);
  // A GPU task planned on a machine without one: the bytes and replay time stay unknown (K from
  // --cost).
  if (task.device != Device::kCuda || training::runtime_info().cuda_available) {
    VT_ASSIGN_OR_RETURN(in.estimate, training::estimate(task, t));
    VT_ASSIGN_OR_RETURN(in.codec_ratio, measured_codec_ratio(task, t));
  } else {
    spdlog::warn(
        "plan: no CUDA device here to measure the {} task on: per-check bytes and replay time are "
        "unknown",
        name_of(task.device));
  }
  VT_ASSIGN_OR_RETURN(verifier::Plan plan, verifier::make_plan(in));
  if (std::string w = exact_mode_warning(task, training::replayable_environments(task, t));
      !w.empty())
    plan.warnings.push_back(w);
  emit(ctx, verifier::plan_to_json(plan), verifier::plan_text(plan));
  return 0;
}

}  // namespace

void register_plan(CLI::App& app, Context& ctx) {
  auto p = std::make_shared<PlanArgs>();
  auto* plan = add_plan_command(app, *p);
  plan->callback([&ctx, p] { ctx.action = [&ctx, p] { return run_plan(ctx, *p); }; });
}

}  // namespace vt::cli
