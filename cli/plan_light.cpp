// `veritrain plan --cost K` in the light `veritrain`: the probabilities and the economics need
// no LibTorch when K is given. Without --cost, `plan` measures one step of the task, and
// main_light.cpp hands it to `veritrain-torch` (cmd_verify.cpp's plan), whose flags these mirror.
#include <filesystem>

#include "cli/app.h"
#include "protocol/task.h"
#include "verifier/plan.h"

namespace vt::cli {
namespace {

struct LightPlanArgs {
  std::string task, fetch_after = "auto";
  std::uint64_t epochs = 0;
  double confidence = 0.99, cheat_fraction = 0.1, check_probability = 0.0, reward = -1, penalty = -1, cost = -1;
};

Result<int> run_light_plan(Context& ctx, const LightPlanArgs& a) {
  VT_ASSIGN_OR_RETURN(Task task, load_task(a.task));
  verifier::PlanInputs in;
  in.epochs = a.epochs > 0 ? a.epochs : static_cast<std::uint64_t>(task.epochs);
  in.policy.confidence = a.confidence;
  in.policy.cheat_fraction = a.cheat_fraction;
  if (a.check_probability > 0) in.policy.check_probability = a.check_probability;
  if (a.reward >= 0) in.reward = a.reward;
  if (a.penalty >= 0) in.penalty = a.penalty;
  in.honest_cost = a.cost;
  VT_ASSIGN_OR_RETURN(verifier::Plan plan, verifier::make_plan(in));
  nlohmann::json j = verifier::plan_to_json(plan);
  j["per_check_measured"] = false;
  emit(ctx, j,
       verifier::plan_text(plan) +
           "(with --cost, plan measures nothing: per-check bytes and replay time come from `plan` without --cost, "
           "or `veritrain estimate`, on a machine with the task's device)\n");
  return 0;
}

}  // namespace

void register_light_plan(CLI::App& app, Context& ctx) {
  auto p = std::make_shared<LightPlanArgs>();
  auto* plan = app.add_subcommand("plan", "How many checks, what they cost, and whether cheating could pay");
  plan->add_option("--task", p->task, "task.json")->required();
  plan->add_option("--epochs", p->epochs, "Plan for this many epochs instead of the task's");
  plan->add_option("--confidence", p->confidence, "Wanted probability of catching the cheat")->capture_default_str();
  plan->add_option("--cheat-fraction", p->cheat_fraction, "Fraction of epochs cheated")->capture_default_str();
  plan->add_option("--check-probability", p->check_probability, "Evaluate this p instead");
  plan->add_option("--fetch-after", p->fetch_after, "As verify's: auto or always (a storage audit)")
      ->check(CLI::IsMember({"auto", "always"}))
      ->capture_default_str();
  plan->add_option("--reward", p->reward, "R: payment to an accepted provider");
  plan->add_option("--penalty", p->penalty, "D: the provider's deposit, forfeited when caught");
  plan->add_option("--cost", p->cost, "K: the honest training cost (default: measured device-seconds)")->required();
  plan->callback([&ctx, p] { ctx.action = [&ctx, p] { return run_light_plan(ctx, *p); }; });
}

}  // namespace vt::cli
