#pragma once
// The probability of the challenge policy (docs/plan.md), and what it guarantees.
//
// Probability. A provider that cheats on m = ceil(c·N) of N epochs escapes a policy that
// challenges each epoch independently with probability p with probability (1 − p)^m, so
//   1 − (1 − p)^m ≥ P   ⇔   p ≥ 1 − (1 − P)^(1/m).
// check_probability returns that p. c·N is rounded up after subtracting 1e-9 so that 0.7 · 10
// (7.000000000000001 in binary floating point) counts as 7 epochs, not 8.
//
// At least one check. If the independent draws select no epoch, one epoch is drawn uniformly
// from 1..N. This only adds checks, so detection never falls below 1 − (1 − p)^m; with a
// uniform p it is exactly 1 − (1 − p)^m + (1 − p)^N · m/N (the fallback lands on a cheated
// epoch with probability m/N), and a provider that cheats on every epoch is always caught.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"

namespace vt::verifier {

// An unbounded reward, penalty or cost: what the policy's formulas take to their limit.
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// p = 1 − (1 − confidence)^(1/m), m = max(1, ceil(cheat_fraction · epochs − 1e-9)).
// Requires 0 < confidence ≤ 1, 0 < cheat_fraction ≤ 1, epochs ≥ 1 (validate with
// derive_probability, which names the offending input).
double check_probability(double confidence, double cheat_fraction, std::uint64_t epochs);

// m above: how many epochs "cheating on a fraction c" means.
std::uint64_t cheated_epochs(double cheat_fraction, std::uint64_t epochs);

// `verify --reward R --penalty D [--cost K]` (docs/plan.md, "p from the economics"). A provider
// that fakes m of N epochs saves (m/N)·K and, caught, forfeits R + D. Detection 1 − (1 − p)^m is
// concave in m, so the gain is convex and largest at m = 1 or m = N; p = 1 − (1 − ρ)^(1/N) with
// ρ = K/(R + D) makes the gain ≤ 0 at m = N (1 − (1 − p)^N = ρ) and therefore at m = 1 too
// (p ≥ ρ/N by Bernoulli's inequality): faking any number of epochs never pays. That is
// N·p ≈ −ln(1 − ρ) expected checks whatever N is: 2.3 at ρ = 0.9, 4.6 at ρ = 0.99.
struct EconomicsRequest {
  double reward = 0.0;               // R
  double penalty = 0.0;              // D
  double cost = 0.0;                 // K, > 0, in the same unit as R and D
  std::string cost_basis = "given";  // or how K was estimated
};

// What the requestor asked for: confidence + cheat_fraction, a fixed probability, or economics.
struct PolicyRequest {
  double confidence = 0.99;
  double cheat_fraction = 0.1;
  // Neither --confidence nor --cheat-fraction was given: the guarantee says it rests on the
  // defaults, not on numbers the user chose.
  bool defaults = false;
  std::optional<double> check_probability;    // `--check-probability p` overrides the derivation
  std::optional<EconomicsRequest> economics;  // `--reward/--penalty[/--cost]`; excludes the above
};

// p and how it was derived: what a verdict and a plan quote.
struct ProbabilityDerivation {
  std::string method;       // "confidence" | "fixed" | "economics"
  double confidence = 0.0;  // the target (method "confidence") or what p achieves (the others)
  double cheat_fraction = 0.0;
  std::uint64_t epochs = 0;
  std::uint64_t cheated_epochs = 0;  // m
  double p = 0.0;
  std::string formula;                        // the formula with numbers filled in, for people
  std::optional<EconomicsRequest> economics;  // method "economics": R, D, K and K's basis
  double cost_ratio = 0.0;                    // ρ = K/(R + D), method "economics"
  double expected_checks = 0.0;               // N·p + (1 − p)^N, the fallback included
  // One sentence for people: which policy set p and what it guarantees, e.g. "p = 0.37 from
  // --confidence 0.99: a provider cheating on 10 % of epochs (2 of 20) is caught with
  // probability at least 0.99".
  std::string guarantee;
};

// Errors (invalid input) name the flag: "--confidence: expected 0 < P <= 1, got 1.5".
Result<ProbabilityDerivation> derive_probability(const PolicyRequest& request,
                                                 std::uint64_t epochs);

nlohmann::json derivation_to_json(const ProbabilityDerivation& d);

// "a provider cheating on 10 % of epochs (2 of 20) is caught with probability at least 0.99":
// 1 − (1 − p)^m, the at-least-one fallback not counted.
std::string detection_claim(const ProbabilityDerivation& d);

}  // namespace vt::verifier
