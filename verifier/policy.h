#pragma once
// The challenge policy (docs/plan.md): which epochs a verifier re-runs, drawn from its own
// secret randomness so that a provider can predict neither how many checks come nor where.
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
// and never less than a coin flip. Boosting only raises probabilities, so the guarantee above
// still holds; it is a heuristic on top of it, not a replacement.
//
// Randomness. Every draw reads one stream: block j = SHA-256("veritrain/challenge/v1" || seed
// || u64le j), consumed as consecutive little-endian u64 words; a uniform in [0, 1) is the top
// 53 bits of one word times 2^−53. Epoch e (1..N, in order) is challenged iff its word's
// uniform < p_e. The fallback epoch is 1 + uniform(N) by rejection (Sha256Stream, as
// fp::PrfStream). The seed is 32 bytes from the OS CSPRNG (OpenSSL RAND_bytes) and never written
// anywhere, or the bytes of `--seed HEX` when a run is to be reproduced (and then recorded in the
// plan).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/bytes.h"
#include "common/sha256_stream.h"
#include "fingerprint/fingerprint.h"
#include "protocol/log.h"

namespace vt::verifier {

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

// The seed of a reproducible run or a fresh secret one, and the stream described above.
class ChallengeRandom {
 public:
  // 32 bytes from RAND_bytes. Errors (I/O) if the CSPRNG cannot be read.
  static Result<ChallengeRandom> from_os();
  // 1..64 bytes as hex; errors name `--seed`.
  static Result<ChallengeRandom> from_seed_hex(std::string_view hex);

  std::uint64_t next_u64() { return stream_.next_u64(); }
  double uniform01() { return stream_.uniform01(); }  // [0, 1), 53 bits
  std::uint64_t uniform(std::uint64_t bound) {
    return stream_.uniform(bound);
  }  // [0, bound), bound ≥ 1
  // The seed as hex when it came from `--seed`; empty for an OS seed, which stays secret.
  const std::string& seed_hex() const { return seed_hex_; }

 private:
  ChallengeRandom(const Bytes& seed, std::string seed_hex);
  std::string seed_hex_;
  Sha256Stream stream_;  // keyed by "veritrain/challenge/v1" || seed
};

// Relative L2 distance between two tracking fingerprints. Errors (rejected) when they do not
// sample the same positions. NaN/Inf values give +Inf; 0/0 gives 0.
Result<double> fingerprint_movement(const fp::Fingerprint& previous,
                                    const fp::Fingerprint& current);

// movement(e) for e = 1..records.size()−1 (index e−1), from each record's
// tracking_fingerprint. records[i] must be epoch i. Errors name the epoch whose tracking
// fingerprint does not parse or samples other positions than epoch 0's.
Result<std::vector<double>> tracking_movements(std::span<const SignedRecord> records);

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
