// How likely each epoch is to be challenged: p from a confidence target, a fixed value or the
// economics (docs/plan.md), and what that guarantees in words.
#include "verifier/policy/probability.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/json_number.h"
#include "common/text.h"

namespace vt::verifier {
namespace {}  // namespace

std::uint64_t cheated_epochs(double cheat_fraction, std::uint64_t epochs) {
  const double raw = std::ceil(cheat_fraction * static_cast<double>(epochs) - 1e-9);
  if (!(raw >= 1.0)) return 1;
  return std::min<std::uint64_t>(epochs, static_cast<std::uint64_t>(raw));
}

double check_probability(double confidence, double cheat_fraction, std::uint64_t epochs) {
  const auto m = static_cast<double>(cheated_epochs(cheat_fraction, epochs));
  // −expm1(log1p(−P)/m) is 1 − (1 − P)^(1/m) without cancellation when P or p is tiny.
  if (confidence >= 1.0) return 1.0;
  return -std::expm1(std::log1p(-confidence) / m);
}

namespace {

Status check_amount(double v, const std::string& flag) {
  if (std::isfinite(v) && v >= 0.0) return {};
  return invalid_input(flag + format_numbers(": expected a finite number >= 0, got %g", v));
}

// p from R, D and K (PolicyRequest's comment): the smallest p at which faking every epoch does
// not pay, which makes faking any number of them not pay.
Status derive_from_economics(const EconomicsRequest& e, ProbabilityDerivation& d) {
  VT_RETURN_IF_ERROR(check_amount(e.reward, "--reward"));
  VT_RETURN_IF_ERROR(check_amount(e.penalty, "--penalty"));
  if (!(std::isfinite(e.cost) && e.cost > 0.0))
    return invalid_input(format_numbers("--cost: expected K > 0, got %g", e.cost));
  const double stake = e.reward + e.penalty;
  if (!(stake > e.cost)) {
    return invalid_input(format_numbers(
        "--reward/--penalty: R + D = %g is not more than the honest cost K = %g: faking every "
        "epoch saves more than being caught can cost, so no check probability makes cheating "
        "unprofitable; raise the reward or the deposit",
        stake, e.cost));
  }
  const auto n = static_cast<double>(d.epochs);
  d.method = "economics";
  d.economics = e;
  d.cost_ratio = e.cost / stake;
  d.p = -std::expm1(std::log1p(-d.cost_ratio) / n);
  d.formula = format_numbers("p = 1 - (1 - K/(R+D))^(1/N) = 1 - (1 - %.6g/%.6g)^(1/%.0f) = %.6g",
                             e.cost, stake, n, d.p) +
              format_numbers(
                  ": faking all N epochs saves K and is caught with probability 1 - (1 - p)^N = "
                  "%.6g, so faking "
                  "any number of epochs never pays",
                  d.cost_ratio);
  return {};
}

std::string percent(double fraction) {
  const double pc = 100.0 * fraction;
  return format_numbers(pc == std::round(pc) ? "%.0f %%" : "%.3g %%", pc);
}

}  // namespace

std::string detection_claim(const ProbabilityDerivation& d) {
  return "a provider cheating on " + percent(d.cheat_fraction) +
         format_numbers(" of epochs (%.0f of %.0f) is caught with probability at least %.4g",
                        static_cast<double>(d.cheated_epochs), static_cast<double>(d.epochs),
                        d.confidence);
}

Result<ProbabilityDerivation> derive_probability(const PolicyRequest& request,
                                                 std::uint64_t epochs) {
  if (epochs == 0) return invalid_input("epochs: expected at least 1 epoch to challenge, got 0");
  if (!(request.cheat_fraction > 0.0 && request.cheat_fraction <= 1.0)) {
    return invalid_input(
        format_numbers("--cheat-fraction: expected 0 < c <= 1, got %g", request.cheat_fraction));
  }
  ProbabilityDerivation d;
  d.cheat_fraction = request.cheat_fraction;
  d.epochs = epochs;
  d.cheated_epochs = cheated_epochs(request.cheat_fraction, epochs);
  const auto m = static_cast<double>(d.cheated_epochs);
  const auto n = static_cast<double>(epochs);
  std::string source;
  if (request.economics) {
    VT_RETURN_IF_ERROR(derive_from_economics(*request.economics, d));
    d.confidence = -std::expm1(m * std::log1p(-d.p));
    const EconomicsRequest& e = *request.economics;
    source = format_numbers("from --reward %g --penalty %g", e.reward, e.penalty) +
             format_numbers(" and K = %g", e.cost) + " (" + e.cost_basis + ")";
    if (request.defaults)
      source +=
          format_numbers(" (judged for --cheat-fraction %g, the default)", request.cheat_fraction);
  } else if (request.check_probability) {
    const double p = *request.check_probability;
    if (!(p > 0.0 && p <= 1.0))
      return invalid_input(format_numbers("--check-probability: expected 0 < p <= 1, got %g", p));
    d.method = "fixed";
    d.p = p;
    d.confidence = -std::expm1(m * std::log1p(-p));  // 1 − (1 − p)^m
    d.formula =
        format_numbers("p = %.6g given; catches m = %.0f cheated epochs with 1 - (1 - p)^m = %.6g",
                       p, m, d.confidence);
    source = "given with --check-probability";
    if (request.defaults)
      source +=
          format_numbers(" (judged for --cheat-fraction %g, the default)", request.cheat_fraction);
  } else {
    if (!(request.confidence > 0.0 && request.confidence <= 1.0)) {
      return invalid_input(
          format_numbers("--confidence: expected 0 < P <= 1, got %g", request.confidence));
    }
    d.method = "confidence";
    d.confidence = request.confidence;
    d.p = check_probability(request.confidence, request.cheat_fraction, epochs);
    d.formula =
        format_numbers("p = 1 - (1 - P)^(1/m) = 1 - (1 - %.6g)^(1/%.0f) = %.6g", request.confidence,
                       m, d.p) +
        format_numbers(", m = ceil(c*N) = ceil(%.6g*%.0f) = %.0f", request.cheat_fraction, n, m);
    source = format_numbers("from --confidence %g --cheat-fraction %g", request.confidence,
                            request.cheat_fraction);
    if (request.defaults) source += " (the defaults)";
  }
  d.expected_checks = n * d.p + (d.p >= 1.0 ? 0.0 : std::exp(n * std::log1p(-d.p)));
  d.guarantee = format_numbers("p = %.4g ", d.p) + source + ": " + detection_claim(d);
  if (d.method == "economics") d.guarantee += "; cheating on any number of epochs does not pay";
  d.guarantee += format_numbers(" (%.2f checks expected)", d.expected_checks);
  return d;
}

nlohmann::json derivation_to_json(const ProbabilityDerivation& d) {
  nlohmann::json economics = nullptr;
  if (d.economics) {
    economics = {{"reward", json_number(d.economics->reward)},
                 {"penalty", json_number(d.economics->penalty)},
                 {"cost", json_number(d.economics->cost)},
                 {"cost_basis", d.economics->cost_basis},
                 {"cost_ratio", json_number(d.cost_ratio)}};
  }
  return {{"method", d.method},
          {"confidence", json_number(d.confidence)},
          {"cheat_fraction", json_number(d.cheat_fraction)},
          {"epochs", d.epochs},
          {"cheated_epochs", d.cheated_epochs},
          {"p", json_number(d.p)},
          {"formula", d.formula},
          {"economics", std::move(economics)},
          {"expected_checks", json_number(d.expected_checks)},
          {"guarantee", d.guarantee}};
}

}  // namespace vt::verifier
