// Each epoch's chance of a challenge (boosted on a jump or a stall of its movement) and the draw
// itself, epoch by epoch as the log grows (docs/plan.md, "Boosts").
#include "verifier/policy/challenges.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/json_number.h"
#include "verifier/policy/probability.h"

namespace vt::verifier {
namespace {

constexpr std::uint64_t kReferenceWindow = 4;  // ref(e): the epochs just before e
constexpr std::uint64_t kSpreadWindow = 16;    // σ(e): the last d(j)
constexpr std::uint64_t kFirstJudged = 4;      // e ≥ 4 has three movements before it
constexpr double kMadToSigma = 1.4826;         // MAD of a normal sample → its σ
const double kJumpFloor = std::log(3.0);
const double kStallFloor = std::log(10.0);
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double median(std::vector<double> v) {
  if (v.empty()) return kNaN;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lower + upper);
}

// d(j) for one epoch, or NaN when j cannot be judged from its history.
double log_ratio(std::span<const double> movements, std::uint64_t epoch, double* reference) {
  *reference = kNaN;
  if (epoch < kFirstJudged) return kNaN;
  std::vector<double> before;
  for (std::uint64_t j = epoch > kReferenceWindow ? epoch - kReferenceWindow : 1; j < epoch; ++j) {
    if (std::isfinite(movements[j - 1])) before.push_back(movements[j - 1]);
  }
  if (before.size() < 3) return kNaN;
  *reference = median(std::move(before));
  const double m = movements[epoch - 1];
  if (!std::isfinite(m)) return kNaN;
  if (*reference == 0.0) return m == 0.0 ? kNaN : kInf;
  if (m == 0.0) return -kInf;
  return std::log(m / *reference);
}

}  // namespace

std::string_view boost_name(Boost b) {
  switch (b) {
    case Boost::kJump:
      return "jump";
    case Boost::kStall:
      return "stall";
    case Boost::kNone:
      break;
  }
  return "";
}

EpochChance chance_of_epoch(std::span<const double> movements, std::uint64_t epoch, double p,
                            const BoostPolicy& boost) {
  EpochChance c;
  c.epoch = epoch;
  c.movement = epoch >= 1 && epoch <= movements.size() ? movements[epoch - 1] : kNaN;
  c.reference = kNaN;
  c.log_ratio = kNaN;
  c.probability = p;
  if (std::isnan(c.movement)) return c;  // unknown: no evidence either way
  if (c.movement == 0.0) {
    c.boost = Boost::kStall;
  } else if (!std::isfinite(c.movement)) {
    c.boost = Boost::kJump;
  } else {
    c.log_ratio = log_ratio(movements, epoch, &c.reference);
    if (!std::isnan(c.log_ratio)) {
      std::vector<double> history;
      const std::uint64_t from =
          std::max(kFirstJudged, epoch > kSpreadWindow ? epoch - kSpreadWindow : 1);
      for (std::uint64_t j = from; j < epoch; ++j) {
        double unused;
        const double d = log_ratio(movements, j, &unused);
        if (std::isfinite(d)) history.push_back(d);
      }
      double sigma = 0.0;
      if (history.size() >= 3) {
        const double mid = median(history);
        for (double& d : history) d = std::abs(d - mid);
        sigma = kMadToSigma * median(std::move(history));
      }
      if (c.log_ratio > std::max(3.0 * sigma, kJumpFloor)) c.boost = Boost::kJump;
      if (c.log_ratio < -std::max(3.0 * sigma, kStallFloor)) c.boost = Boost::kStall;
    }
  }
  if (c.boost != Boost::kNone) {
    const double rounds = -std::expm1(boost.rounds * std::log1p(-std::min(p, 1.0)));
    c.probability = std::max({p, rounds, boost.floor});
  }
  return c;
}

ChallengeStream::ChallengeStream(ProbabilityDerivation derivation, ChallengeRandom random,
                                 BoostPolicy boost)
    : random_(std::move(random)) {
  plan_.derivation = std::move(derivation);
  plan_.boost = boost;
  plan_.seed_hex = random_.seed_hex();
}

Result<bool> ChallengeStream::decide(double movement) {
  if (finished_ || next_epoch() > plan_.derivation.epochs) {
    return internal_error("ChallengeStream::decide: epoch " + std::to_string(next_epoch()) +
                          " is past the task's " + std::to_string(plan_.derivation.epochs) +
                          " epochs");
  }
  movements_.push_back(movement);
  EpochChance c = chance_of_epoch(movements_, next_epoch(), plan_.derivation.p, plan_.boost);
  c.challenged = random_.uniform01() < c.probability;
  if (c.challenged) plan_.challenged.push_back(c.epoch);
  plan_.epochs.push_back(c);
  return c.challenged;
}

Result<std::optional<std::uint64_t>> ChallengeStream::finish() {
  if (finished_) return internal_error("ChallengeStream::finish: called twice");
  if (plan_.epochs.size() != plan_.derivation.epochs) {
    return internal_error("ChallengeStream::finish: only " + std::to_string(plan_.epochs.size()) +
                          " of " + std::to_string(plan_.derivation.epochs) + " epochs decided");
  }
  finished_ = true;
  if (!plan_.challenged.empty()) return std::optional<std::uint64_t>{};
  const std::uint64_t e = 1 + random_.uniform(plan_.derivation.epochs);
  plan_.fallback_used = true;
  plan_.challenged.push_back(e);
  plan_.epochs[e - 1].challenged = true;
  return std::optional<std::uint64_t>{e};
}

ChallengePlan plan_challenges(const ProbabilityDerivation& derivation,
                              std::span<const double> movements, ChallengeRandom& random,
                              const BoostPolicy& boost) {
  ChallengeStream stream(derivation, std::move(random), boost);
  for (std::uint64_t e = 1; e <= derivation.epochs; ++e) {
    (void)stream.decide(e <= movements.size() ? movements[e - 1] : kNaN).value();
  }
  (void)stream.finish().value();
  random = std::move(stream.random_);
  return std::move(stream.plan_);
}

nlohmann::json challenge_plan_to_json(const ChallengePlan& plan) {
  nlohmann::json epochs = nlohmann::json::array();
  for (const EpochChance& c : plan.epochs) {
    epochs.push_back({{"epoch", c.epoch},
                      {"movement", json_number(c.movement)},
                      {"reference", json_number(c.reference)},
                      {"log_ratio", json_number(c.log_ratio)},
                      {"boost", boost_name(c.boost)},
                      {"probability", json_number(c.probability)},
                      {"challenged", c.challenged}});
  }
  nlohmann::json j = {
      {"derivation", derivation_to_json(plan.derivation)},
      {"boost_policy", {{"rounds", plan.boost.rounds}, {"floor", json_number(plan.boost.floor)}}},
      {"epochs", std::move(epochs)},
      {"challenged", plan.challenged},
      {"fallback_used", plan.fallback_used},
      {"seed", plan.seed_hex.empty() ? nlohmann::json(nullptr) : nlohmann::json(plan.seed_hex)}};
  return j;
}

}  // namespace vt::verifier
