#include "verifier/policy/cost_plan.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/json_number.h"
#include "common/text.h"
#include "verifier/policy/probability.h"
#include "verifier/source/source.h"

namespace vt::verifier {
namespace {

// (1 − p)^n without losing small p to rounding.
double miss(double p, double n) {
  return p >= 1.0 ? (n == 0.0 ? 1.0 : 0.0) : std::exp(n * std::log1p(-p));
}

Status check_amount(const std::optional<double>& v, std::string_view flag) {
  if (v && !(std::isfinite(*v) && *v >= 0.0)) {
    return invalid_input(std::string(flag) +
                         format_numbers(": expected a finite number >= 0, got %g", *v));
  }
  return {};
}

Result<Economics> economics(const PlanInputs& in, double p) {
  VT_RETURN_IF_ERROR(check_amount(in.reward, "--reward"));
  VT_RETURN_IF_ERROR(check_amount(in.penalty, "--penalty"));
  VT_RETURN_IF_ERROR(check_amount(in.honest_cost, "--cost"));
  Economics e;
  e.reward = in.reward.value_or(0.0);
  e.penalty = in.penalty.value_or(0.0);
  if (in.honest_cost) {
    e.honest_cost = *in.honest_cost;
    e.cost_basis = "given";
  } else if (in.estimate) {
    e.honest_cost = estimated_honest_cost(*in.estimate, in.epochs);
    e.cost_basis = kEstimatedCostBasis;
  } else {
    return invalid_input(
        "--reward/--penalty: the honest cost K is unknown; pass --cost or let plan measure an "
        "estimate");
  }
  if (!(e.honest_cost > 0.0))
    return invalid_input(format_numbers("--cost: expected K > 0, got %g", e.honest_cost));
  const double stake = e.reward + e.penalty;
  const auto n = static_cast<double>(in.epochs);
  e.cost_ratio = stake > 0.0 ? e.honest_cost / stake : kInf;
  e.can_be_safe = e.cost_ratio < 1.0;
  e.required_expected_checks = e.can_be_safe ? -std::log1p(-e.cost_ratio) : kInf;
  e.required_probability = e.can_be_safe ? -std::expm1(std::log1p(-e.cost_ratio) / n) : kInf;
  e.catch_all_probability = 1.0 - miss(p, n);
  e.cheating_pays = !(e.catch_all_probability >= e.cost_ratio);
  e.best_cheat_gain = -kInf;
  for (std::uint64_t m = 1; m <= in.epochs; ++m) {
    const double gain =
        static_cast<double>(m) / n * e.honest_cost - detection_probability(p, m, in.epochs) * stake;
    if (gain > e.best_cheat_gain) {
      e.best_cheat_gain = gain;
      e.best_cheat_epochs = m;
    }
  }
  e.cheating_pays_exact = e.best_cheat_gain > 0.0;
  if (!e.can_be_safe) {
    e.conclusion =
        "R + D <= K: cheating saves more than it can ever lose, so no number of checks makes it "
        "unprofitable; raise the reward or the deposit";
  } else if (e.cheating_pays) {
    e.conclusion =
        format_numbers(
            "cheating can pay: p = %.4g gives 1-(1-p)^N = %.4g < K/(R+D) = %.4g; use p >= %.4g", p,
            e.catch_all_probability, e.cost_ratio) +
        format_numbers(" (about %.2f expected checks)", e.required_expected_checks);
    if (!e.cheating_pays_exact) {
      e.conclusion += "; only the at-least-one check keeps every cheat from gaining in expectation";
    }
  } else {
    e.conclusion = format_numbers(
        "cheating never pays: 1-(1-p)^N = %.4g >= K/(R+D) = %.4g (needs %.2f expected checks)",
        e.catch_all_probability, e.cost_ratio, e.required_expected_checks);
  }
  return e;
}

}  // namespace

double estimated_honest_cost(const training::MemoryEstimate& estimate, std::uint64_t epochs) {
  return static_cast<double>(epochs) * static_cast<double>(estimate.steps_per_epoch) *
         estimate.step_seconds;
}

double detection_probability(double p, std::uint64_t cheated, std::uint64_t epochs) {
  if (epochs == 0) return 0.0;
  const double fallback = miss(p, static_cast<double>(epochs)) * static_cast<double>(cheated) /
                          static_cast<double>(epochs);
  return 1.0 - miss(p, static_cast<double>(cheated)) + fallback;
}

std::uint64_t binomial_quantile(std::uint64_t n, double p, double q) {
  if (p <= 0.0) return 0;
  if (p >= 1.0) return n;
  // pmf(k) in log space, so that (1 − p)^n underflowing for large n loses nothing that matters.
  const double odds = std::log(p) - std::log1p(-p);
  double log_pmf = static_cast<double>(n) * std::log1p(-p);
  double cdf = 0.0;
  for (std::uint64_t k = 0; k < n; ++k) {
    cdf += std::exp(log_pmf);
    if (cdf >= q) return k;
    log_pmf += std::log(static_cast<double>(n - k)) - std::log(static_cast<double>(k + 1)) + odds;
  }
  return n;
}

training::PeakPrediction replay_peak(const training::MemoryEstimate& e, bool bit_for_bit) {
  const std::uint64_t states = bit_for_bit && e.snapshot_bytes >= kLargeStateBytes ? 1 : 2;
  const std::uint64_t beside = states * e.snapshot_bytes;
  training::PeakPrediction p;
  p.parts = {{"process (LibTorch and veritrain code)", e.process_bytes},
             {"resting state (parameters, optimizer state, buffers)", e.resting_bytes}};
  if (e.step_peak_bytes >= beside) {
    p.parts.push_back({"one step (activations, gradients, workspaces)", e.step_peak_bytes});
  } else {
    p.parts.push_back({std::string("between epochs, ") +
                           (states == 1 ? "one state" : "two states") +
                           " beside the trainer (fetched, loaded or compared; more than a step)",
                       beside});
  }
  return p;
}

Result<Plan> make_plan(const PlanInputs& in) {
  Plan plan;
  VT_ASSIGN_OR_RETURN(plan.probability, derive_probability(in.policy, in.epochs));
  const double p = plan.probability.p;
  const auto n = static_cast<double>(in.epochs);
  plan.expected_checks = n * p + miss(p, n);
  plan.checks_p99 = std::max<std::uint64_t>(1, binomial_quantile(in.epochs, p, 0.99));
  plan.detection_probability = detection_probability(p, plan.probability.cheated_epochs, in.epochs);
  plan.detection_lower_bound = 1.0 - miss(p, static_cast<double>(plan.probability.cheated_epochs));
  if (in.estimate) {
    if (!(std::isfinite(in.codec_ratio) && in.codec_ratio > 0.0)) {
      return invalid_input(
          format_numbers("codec ratio: expected a finite number > 0, got %g", in.codec_ratio));
    }
    const training::MemoryEstimate& est = *in.estimate;
    CheckCost c;
    c.raw_snapshot_bytes = est.snapshot_bytes;
    c.codec_ratio = in.codec_ratio;
    c.states_per_check = in.fetches_after ? 2 : 1;
    c.bytes_per_check = static_cast<std::uint64_t>(
        std::ceil(static_cast<double>(c.states_per_check) *
                  static_cast<double>(est.snapshot_bytes) * in.codec_ratio));
    c.replay_seconds = static_cast<double>(est.steps_per_epoch) * est.step_seconds;
    c.device_bytes = est.snapshot_bytes + est.step_peak_bytes;
    c.host_bytes = 2 * est.snapshot_bytes + c.bytes_per_check;
    c.replay_peak_bytes = replay_peak(est, in.bit_for_bit).total();
    c.device = est.device;
    plan.final_model_bytes = static_cast<std::uint64_t>(
        std::ceil(static_cast<double>(est.snapshot_bytes) * in.codec_ratio));
    plan.expected_bytes = plan.expected_checks * static_cast<double>(c.bytes_per_check) +
                          static_cast<double>(plan.final_model_bytes);
    plan.expected_replay_seconds = plan.expected_checks * c.replay_seconds;
    plan.per_check = c;
  }
  if (in.reward || in.penalty || in.honest_cost) {
    VT_ASSIGN_OR_RETURN(plan.economics, economics(in, p));
  }
  return plan;
}

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json j = {{"probability", derivation_to_json(plan.probability)},
                      {"expected_checks", json_number(plan.expected_checks)},
                      {"checks_p99", plan.checks_p99},
                      {"detection_probability", json_number(plan.detection_probability)},
                      {"detection_lower_bound", json_number(plan.detection_lower_bound)},
                      {"expected_bytes", json_number(plan.expected_bytes)},
                      {"final_model_bytes", plan.final_model_bytes},
                      {"expected_replay_seconds", json_number(plan.expected_replay_seconds)},
                      {"per_check", nullptr},
                      {"economics", nullptr},
                      {"warnings", plan.warnings}};
  if (plan.per_check) {
    const CheckCost& c = *plan.per_check;
    j["per_check"] = {{"raw_snapshot_bytes", c.raw_snapshot_bytes},
                      {"codec_ratio", json_number(c.codec_ratio)},
                      {"states", c.states_per_check},
                      {"bytes", c.bytes_per_check},
                      {"replay_seconds", json_number(c.replay_seconds)},
                      {"device_bytes", c.device_bytes},
                      {"host_bytes", c.host_bytes},
                      {"replay_peak_bytes", c.replay_peak_bytes},
                      {"device", c.device}};
  }
  if (plan.economics) {
    const Economics& e = *plan.economics;
    j["economics"] = {{"reward", json_number(e.reward)},
                      {"penalty", json_number(e.penalty)},
                      {"honest_cost", json_number(e.honest_cost)},
                      {"cost_basis", e.cost_basis},
                      {"cost_ratio", json_number(e.cost_ratio)},
                      {"can_be_safe", e.can_be_safe},
                      {"required_expected_checks", json_number(e.required_expected_checks)},
                      {"required_probability", json_number(e.required_probability)},
                      {"catch_all_probability", json_number(e.catch_all_probability)},
                      {"cheating_pays", e.cheating_pays},
                      {"cheating_pays_exact", e.cheating_pays_exact},
                      {"best_cheat_epochs", e.best_cheat_epochs},
                      {"best_cheat_gain", json_number(e.best_cheat_gain)},
                      {"conclusion", e.conclusion}};
  }
  return j;
}

std::string plan_text(const Plan& plan) {
  const ProbabilityDerivation& d = plan.probability;
  std::string s;
  s += "check probability  " + d.formula + "\n";
  s += format_numbers("checks             %.2f expected of ", plan.expected_checks) +
       count_text(static_cast<double>(d.epochs), "epoch") +
       format_numbers(", 99th percentile %.0f (at least one always)\n",
                      static_cast<double>(plan.checks_p99));
  s += format_numbers("detection          %.4g for a provider cheating on ",
                      plan.detection_probability) +
       count_text(static_cast<double>(d.cheated_epochs), "epoch") +
       format_numbers(" (%.4g without the at-least-one fallback)\n", plan.detection_lower_bound);
  if (plan.per_check) {
    const CheckCost& c = *plan.per_check;
    s += "per check          " + size_text(static_cast<double>(c.bytes_per_check)) + " fetched (" +
         std::to_string(c.states_per_check) + " x " +
         size_text(static_cast<double>(c.raw_snapshot_bytes)) +
         format_numbers(" x ratio %.3g), ", c.codec_ratio) +
         format_numbers("replay %.2f s on ", c.replay_seconds) + c.device + ", " +
         size_text(static_cast<double>(c.device_bytes)) + " device, " +
         size_text(static_cast<double>(c.host_bytes)) + " host memory; one replay peaks at " +
         size_text(static_cast<double>(c.replay_peak_bytes)) + " resident\n";
    s += "in total           " + size_text(plan.expected_bytes) + " (" +
         format_numbers("%.2f", plan.expected_checks) + " checks x " +
         size_text(static_cast<double>(c.bytes_per_check)) + ", and the final model once, " +
         size_text(static_cast<double>(plan.final_model_bytes)) +
         format_numbers(") and %.1f s of replay expected\n", plan.expected_replay_seconds);
  } else {
    s += "per check          unknown (no estimate)\n";
  }
  if (plan.economics) {
    const Economics& e = *plan.economics;
    s += format_numbers("economics          R = %g, D = %g, K = %g", e.reward, e.penalty,
                        e.honest_cost) +
         " (" + e.cost_basis + ")\n";
    s += "                   " + e.conclusion + "\n";
    if (e.can_be_safe && e.cheating_pays != e.cheating_pays_exact) {
      s += "                   counting the at-least-one fallback, the best cheat (" +
           count_text(static_cast<double>(e.best_cheat_epochs), "epoch") +
           format_numbers(") gains %.4g\n", e.best_cheat_gain);
    }
    if (e.can_be_safe) {
      const double n = static_cast<double>(d.epochs);
      s += format_numbers("                   verify --reward %g --penalty %g", e.reward,
                          e.penalty) +
           format_numbers(" --cost %g uses the smallest such p, %.4g: ", e.honest_cost,
                          e.required_probability) +
           format_numbers("%.2f checks expected\n",
                          n * e.required_probability + (1.0 - e.cost_ratio));
    }
  }
  for (const std::string& w : plan.warnings) s += "warning            " + w + "\n";
  return s;
}

}  // namespace vt::verifier
