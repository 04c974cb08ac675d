#include "cli/plan_args.h"

#include "cli/command_table.h"

namespace vt::cli {

CLI::App* add_plan_command(CLI::App& app, PlanArgs& a) {
  auto* plan = app.add_subcommand("plan", summary_of("plan"));
  plan->add_option("--task", a.task, "task.json")->required();
  plan->add_option("--epochs", a.epochs, "Plan for this many epochs instead of the task's");
  const auto given = [&a](const std::string&) { a.policy_given = true; };
  plan->add_option("--confidence", a.confidence, "Wanted probability of catching the cheat")
      ->capture_default_str()
      ->each(given);
  plan->add_option("--cheat-fraction", a.cheat_fraction, "Fraction of epochs cheated")
      ->capture_default_str()
      ->each(given);
  plan->add_option("--check-probability", a.check_probability, "Evaluate this p instead");
  plan->add_option("--fetch-after", a.fetch_after, "As verify's: auto or always (a storage audit)")
      ->check(CLI::IsMember({"auto", "always"}))
      ->capture_default_str();
  plan->add_option("--reward", a.reward, "R: payment to an accepted provider");
  plan->add_option("--penalty", a.penalty, "D: the provider's deposit, forfeited when caught");
  plan->add_option("--cost", a.cost,
                   "K: the honest training cost (default: measured device-seconds)");
  return plan;
}

verifier::PlanInputs plan_inputs(const Task& task, const PlanArgs& a) {
  verifier::PlanInputs in;
  in.epochs = a.epochs > 0 ? a.epochs : static_cast<std::uint64_t>(task.epochs);
  in.policy.confidence = a.confidence;
  in.policy.cheat_fraction = a.cheat_fraction;
  in.policy.defaults = !a.policy_given;
  if (a.check_probability > 0) in.policy.check_probability = a.check_probability;
  // Tolerance mode and a storage audit fetch the state after each check as well (docs/plan.md).
  in.fetches_after = a.fetch_after == "always" || !replays_bit_for_bit(task);
  in.bit_for_bit = replays_bit_for_bit(task);
  if (a.reward >= 0) in.reward = a.reward;
  if (a.penalty >= 0) in.penalty = a.penalty;
  if (a.cost >= 0) in.honest_cost = a.cost;
  return in;
}

}  // namespace vt::cli
