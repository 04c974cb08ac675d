// `veritrain plan --cost K` in the light `veritrain`: the probabilities and the economics need
// no LibTorch when K is given. Without --cost, `plan` measures one step of the task, and
// veritrain_main.cpp hands it to `veritrain-torch` (cmd_plan.cpp), whose flags these mirror.
#include <filesystem>

#include "cli/app.h"
#include "cli/plan_args.h"
#include "protocol/environment.h"
#include "protocol/task.h"
#include "verifier/policy/cost_plan.h"

namespace vt::cli {
namespace {

Result<int> run_light_plan(Context& ctx, const PlanArgs& a) {
  VT_ASSIGN_OR_RETURN(Task task, load_task(a.task));
  verifier::PlanInputs in = plan_inputs(task, a);
  VT_ASSIGN_OR_RETURN(verifier::Plan plan, verifier::make_plan(in));
  if (std::string w = exact_mode_warning(task, {}); !w.empty()) plan.warnings.push_back(w);
  nlohmann::json j = verifier::plan_to_json(plan);
  j["per_check_measured"] = false;
  emit(ctx, j,
       verifier::plan_text(plan) +
           "(with --cost, plan measures nothing: per-check bytes and replay time come from `plan` "
           "without --cost, "
           "or `veritrain estimate`, on a machine with the task's device)\n");
  return 0;
}

}  // namespace

void register_light_plan(CLI::App& app, Context& ctx) {
  auto p = std::make_shared<PlanArgs>();
  auto* plan = add_plan_command(app, *p);
  plan->get_option("--cost")->required();  // without it, plan measures: veritrain-torch's
  plan->callback([&ctx, p] { ctx.action = [&ctx, p] { return run_light_plan(ctx, *p); }; });
}

}  // namespace vt::cli
