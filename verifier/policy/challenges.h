#pragma once
// Which epochs a verifier re-runs (docs/plan.md).
//
// Movement boost. movement(e) = ||v_e − v_{e−1}||₂ / ||v_{e−1}||₂ over the tracking
// fingerprint's decoded values (same positions every epoch). Epoch e is judged only against
// epochs before it, so the online stream and an offline plan decide identically:
//   ref(e)  = median of movement over epochs max(1, e−4) .. e−1         (needs e ≥ 4)
//   d(e)    = ln(movement(e) / ref(e))
//   σ(e)    = 1.4826 · MAD of the finite d(j) of the last 16 epochs j, 4 ≤ j < e (0 if < 3)
//   jump    if d(e) >  max(3σ(e), ln 3)    moved more than 3× its recent neighbours
//   stall   if d(e) < −max(3σ(e), ln 10)   moved less than a tenth of them (a skipped epoch)
// Regardless of history: movement exactly 0 is a stall (the state did not change), and a
// non-finite movement (NaN or Inf values, or a zero-norm previous state that then moved) is
// a jump. Judging against recent epochs in log space keeps a learning-rate schedule, which
// scales movement by orders of magnitude over a run, from flagging every late epoch. A boosted
// epoch is challenged with probability max(1 − (1 − p)^4, 1/2): as if drawn in four rounds,
// and never less than a coin flip. Boosting only raises probabilities, so the guarantee
// still holds (probability.h); it is a heuristic on top of it, not a replacement.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "verifier/policy/challenge_random.h"
#include "verifier/policy/probability.h"

namespace vt::verifier {

enum class Boost { kNone, kJump, kStall };
std::string_view boost_name(Boost b);  // "" | "jump" | "stall"

struct BoostPolicy {
  int rounds = 4;  // boosted p = max(1 − (1 − p)^rounds, floor)
  double floor = 0.5;
};

// The probability that epoch e is challenged, and why.
struct EpochChance {
  std::uint64_t epoch = 0;
  double movement = 0.0;   // NaN when not known (online, no tracking data)
  double reference = 0.0;  // ref(e); NaN when e had too little history to be judged
  double log_ratio = 0.0;  // d(e); NaN when not judged
  Boost boost = Boost::kNone;
  double probability = 0.0;
  bool challenged = false;
};

// Judges epoch e (1-based) given the movements of epochs 1..e (movements[e−1] is its own).
// Pure: the rule above, with no randomness.
EpochChance chance_of_epoch(std::span<const double> movements, std::uint64_t epoch, double p,
                            const BoostPolicy& boost = {});

struct ChallengePlan {
  ProbabilityDerivation derivation;
  BoostPolicy boost;
  std::vector<EpochChance> epochs;        // 1..N
  std::vector<std::uint64_t> challenged;  // ascending
  bool fallback_used = false;             // the draws selected nothing; one epoch was drawn
  std::string seed_hex;                   // empty unless reproducible
};

// Decides every epoch at once (offline). `movements` holds movement(1..N); pass an empty span
// to challenge without boosting (then every epoch has probability p). `random` advances, so
// one stream can draw many plans (the simulation in the tests does).
ChallengePlan plan_challenges(const ProbabilityDerivation& derivation,
                              std::span<const double> movements, ChallengeRandom& random,
                              const BoostPolicy& boost = {});

// Decides epoch by epoch as commitments arrive (`--online`), with the same probabilities and
// the same draws as plan_challenges: for one seed both challenge the same epochs.
class ChallengeStream {
 public:
  ChallengeStream(ProbabilityDerivation derivation, ChallengeRandom random, BoostPolicy boost = {});

  // Epoch next_epoch() has been committed with this movement (NaN when unknown). Returns
  // whether to challenge it. Errors (internal) past the last epoch or after finish().
  Result<bool> decide(double movement);
  // After epoch N: the fallback epoch when nothing was challenged, else nullopt. Errors
  // (internal) before every epoch was decided.
  Result<std::optional<std::uint64_t>> finish();

  std::uint64_t next_epoch() const { return plan_.epochs.size() + 1; }
  const ChallengePlan& plan() const { return plan_; }

 private:
  friend ChallengePlan plan_challenges(const ProbabilityDerivation&, std::span<const double>,
                                       ChallengeRandom&, const BoostPolicy&);

  ChallengePlan plan_;
  ChallengeRandom random_;
  std::vector<double> movements_;
  bool finished_ = false;
};

nlohmann::json challenge_plan_to_json(const ChallengePlan& plan);

}  // namespace vt::verifier
