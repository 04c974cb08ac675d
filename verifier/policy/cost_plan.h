#pragma once
// `veritrain plan`: what a verification with a given confidence will cost and what it buys
// (docs/plan.md has the derivations). A pure function of its inputs; the CLI measures the
// MemoryEstimate and the codec ratio and passes them in.

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "training/estimate.h"  // MemoryEstimate only: a plain struct, no LibTorch linked
#include "verifier/policy/policy.h"

namespace vt::verifier {

struct PlanInputs {
  std::uint64_t epochs = 0;  // N: the task's epochs, or `--epochs`
  PolicyRequest policy;      // confidence and cheat fraction, or a fixed p
  // Measured by `estimate`; without it the plan has no per-check cost and K must be given.
  std::optional<training::MemoryEstimate> estimate;
  double codec_ratio = 1.0;  // compressed / raw bytes of a snapshot container, in (0, 1]ish
  // Whether each check also fetches the committed state after its epoch: tolerance-mode tasks
  // and `--fetch-after always`. An exact check whose replay reaches the root needs only the
  // state before (docs/verifier.md, "What crosses the network").
  bool fetches_after = false;
  bool bit_for_bit = true;  // exact mode (replays_bit_for_bit): what a replay holds (replay_peak)
  std::optional<double> reward;       // R, paid to an accepted provider
  std::optional<double> penalty;      // D, the provider's deposit, forfeited when caught
  std::optional<double> honest_cost;  // K; default N × epoch seconds (device-seconds)
};

// One check moves snapshot e−1 (and e, when it fetches the "after" state) and replays one epoch.
struct CheckCost {
  std::uint64_t raw_snapshot_bytes = 0;
  double codec_ratio = 1.0;
  std::uint64_t states_per_check = 1;   // 1, or 2 when the "after" state is fetched too
  std::uint64_t bytes_per_check = 0;    // states × raw × ratio, rounded up
  double replay_seconds = 0.0;          // steps_per_epoch × step_seconds
  std::uint64_t device_bytes = 0;       // resting state (snapshot bytes) + one step's peak
  std::uint64_t host_bytes = 0;         // two decoded snapshots + their compressed forms
  std::uint64_t replay_peak_bytes = 0;  // one replay's peak resident set (replay_peak below)
  std::string device;
};

// One replay's peak resident set in `verify --jobs 1`, by part (docs/verifier.md, "Memory"): the
// process, the trainer at rest (parameters, gradients, optimizer state) and the larger of one
// step and what waits beside the trainer between epochs: one state, or two where the verifier
// decodes a delta against a state it holds (states below kLargeStateBytes) or compares the
// replay with the committed state (tolerance mode). A replay worker of `--jobs N` peaks alike.
training::PeakPrediction replay_peak(const training::MemoryEstimate& e, bool bit_for_bit);

// The model of docs/plan.md ("Economics"): cheating on everything is the binding case.
struct Economics {
  double reward = 0.0;       // R
  double penalty = 0.0;      // D
  double honest_cost = 0.0;  // K
  std::string cost_basis;    // "given" | "estimated: N x epoch seconds (device-seconds)"
  double cost_ratio = 0.0;   // ρ = K / (R + D)
  bool can_be_safe = false;  // R + D > K; otherwise no number of checks helps
  double required_expected_checks = 0.0;  // −ln(1 − ρ); +inf when !can_be_safe
  double required_probability = 0.0;      // 1 − (1 − ρ)^(1/N); +inf when !can_be_safe
  double catch_all_probability = 0.0;     // 1 − (1 − p)^N, ignoring the at-least-one fallback
  bool cheating_pays = true;              // catch_all_probability < ρ (docs/plan.md's criterion)
  // The same question answered exactly, with the fallback, over every m = 1..N cheated
  // epochs: gain(m) = (m/N)·K − detection(m)·(R + D).
  bool cheating_pays_exact = true;
  std::uint64_t best_cheat_epochs = 0;  // the m with the largest gain
  double best_cheat_gain = 0.0;
  std::string conclusion;  // one sentence for people
};

struct Plan {
  ProbabilityDerivation probability;
  double expected_checks = 0.0;        // N·p + (1 − p)^N (the fallback adds a check)
  std::uint64_t checks_p99 = 0;        // 99th percentile of max(1, Binomial(N, p))
  double detection_probability = 0.0;  // exact, fallback included, for m cheated epochs
  double detection_lower_bound = 0.0;  // 1 − (1 − p)^m
  std::optional<CheckCost> per_check;
  // verify fetches the final model once whatever it challenges (docs/verifier.md, step 4):
  // one compressed state, raw × ratio.
  std::uint64_t final_model_bytes = 0;
  // expected_checks × bytes_per_check + final_model_bytes (0 without cost): what verify's
  // "fetched in total" comes to on average.
  double expected_bytes = 0.0;
  double expected_replay_seconds = 0.0;
  std::optional<Economics> economics;
  // Said before anyone pays: what could leave a verdict inconclusive (exact_mode_warning).
  std::vector<std::string> warnings;
};

// K when it is not given: N × steps_per_epoch × step_seconds, the device-seconds honest training
// takes on the measuring machine (R and D are then read in device-seconds too).
double estimated_honest_cost(const training::MemoryEstimate& estimate, std::uint64_t epochs);
inline constexpr const char* kEstimatedCostBasis =
    "estimated: N x epoch seconds (device-seconds; R and D in the same unit)";

// Probability that a uniform-p policy with the fallback catches a provider cheating on m of N
// epochs: 1 − (1 − p)^m + (1 − p)^N · m/N.
double detection_probability(double p, std::uint64_t cheated, std::uint64_t epochs);

// Smallest k with P(Binomial(n, p) ≤ k) ≥ q, for 0 < q < 1.
std::uint64_t binomial_quantile(std::uint64_t n, double p, double q);

// Errors (invalid input) name the flag: "--reward: expected a finite number >= 0, got -3";
// economics without --cost and without an estimate to derive K from is an error too.
Result<Plan> make_plan(const PlanInputs& inputs);

nlohmann::json plan_to_json(const Plan& plan);
std::string plan_text(const Plan& plan);  // several lines, each ending in '\n'

}  // namespace vt::verifier
