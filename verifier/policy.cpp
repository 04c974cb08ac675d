#include "verifier/policy.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/json_number.h"
#include "common/sha256.h"
#include "common/text.h"
#include "fingerprint/compare.h"

namespace vt::verifier {
namespace {

constexpr std::string_view kStreamDomain = "veritrain/challenge/v1";
constexpr std::size_t kSecretSeedBytes = 32;
constexpr std::size_t kMaxSeedBytes = 64;
constexpr std::uint64_t kReferenceWindow = 4;  // ref(e): the epochs just before e
constexpr std::uint64_t kSpreadWindow = 16;    // σ(e): the last d(j)
constexpr std::uint64_t kFirstJudged = 4;      // e ≥ 4 has three movements before it
constexpr double kMadToSigma = 1.4826;         // MAD of a normal sample → its σ
const double kJumpFloor = std::log(3.0);
const double kStallFloor = std::log(10.0);
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string fmt(const char* format, double a, double b = 0.0, double c = 0.0, double d = 0.0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

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
  return invalid_input(flag + fmt(": expected a finite number >= 0, got %g", v));
}

// p from R, D and K (PolicyRequest's comment): the smallest p at which faking every epoch does
// not pay, which makes faking any number of them not pay.
Status derive_from_economics(const EconomicsRequest& e, ProbabilityDerivation& d) {
  VT_RETURN_IF_ERROR(check_amount(e.reward, "--reward"));
  VT_RETURN_IF_ERROR(check_amount(e.penalty, "--penalty"));
  if (!(std::isfinite(e.cost) && e.cost > 0.0))
    return invalid_input(fmt("--cost: expected K > 0, got %g", e.cost));
  const double stake = e.reward + e.penalty;
  if (!(stake > e.cost)) {
    return invalid_input(
        fmt("--reward/--penalty: R + D = %g is not more than the honest cost K = %g: faking every "
            "epoch saves more than being caught can cost, so no check probability makes cheating "
            "unprofitable; raise the reward or the deposit",
            stake, e.cost));
  }
  const auto n = static_cast<double>(d.epochs);
  d.method = "economics";
  d.economics = e;
  d.cost_ratio = e.cost / stake;
  d.p = -std::expm1(std::log1p(-d.cost_ratio) / n);
  d.formula = fmt("p = 1 - (1 - K/(R+D))^(1/N) = 1 - (1 - %.6g/%.6g)^(1/%.0f) = %.6g", e.cost,
                  stake, n, d.p) +
              fmt(": faking all N epochs saves K and is caught with probability 1 - (1 - p)^N = "
                  "%.6g, so faking "
                  "any number of epochs never pays",
                  d.cost_ratio);
  return {};
}

std::string percent(double fraction) {
  const double pc = 100.0 * fraction;
  return fmt(pc == std::round(pc) ? "%.0f %%" : "%.3g %%", pc);
}

}  // namespace

std::string detection_claim(const ProbabilityDerivation& d) {
  return "a provider cheating on " + percent(d.cheat_fraction) +
         fmt(" of epochs (%.0f of %.0f) is caught with probability at least %.4g",
             static_cast<double>(d.cheated_epochs), static_cast<double>(d.epochs), d.confidence);
}

Result<ProbabilityDerivation> derive_probability(const PolicyRequest& request,
                                                 std::uint64_t epochs) {
  if (epochs == 0) return invalid_input("epochs: expected at least 1 epoch to challenge, got 0");
  if (!(request.cheat_fraction > 0.0 && request.cheat_fraction <= 1.0)) {
    return invalid_input(
        fmt("--cheat-fraction: expected 0 < c <= 1, got %g", request.cheat_fraction));
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
    source = fmt("from --reward %g --penalty %g", e.reward, e.penalty) +
             fmt(" and K = %g", e.cost) + " (" + e.cost_basis + ")";
  } else if (request.check_probability) {
    const double p = *request.check_probability;
    if (!(p > 0.0 && p <= 1.0))
      return invalid_input(fmt("--check-probability: expected 0 < p <= 1, got %g", p));
    d.method = "fixed";
    d.p = p;
    d.confidence = -std::expm1(m * std::log1p(-p));  // 1 − (1 − p)^m
    d.formula = fmt("p = %.6g given; catches m = %.0f cheated epochs with 1 - (1 - p)^m = %.6g", p,
                    m, d.confidence);
    source = "given with --check-probability";
  } else {
    if (!(request.confidence > 0.0 && request.confidence <= 1.0)) {
      return invalid_input(fmt("--confidence: expected 0 < P <= 1, got %g", request.confidence));
    }
    d.method = "confidence";
    d.confidence = request.confidence;
    d.p = check_probability(request.confidence, request.cheat_fraction, epochs);
    d.formula =
        fmt("p = 1 - (1 - P)^(1/m) = 1 - (1 - %.6g)^(1/%.0f) = %.6g, m = ceil(c*N) = ceil(%.6g*N)",
            request.confidence, m, d.p, request.cheat_fraction);
    source =
        fmt("from --confidence %g --cheat-fraction %g", request.confidence, request.cheat_fraction);
  }
  d.expected_checks = n * d.p + (d.p >= 1.0 ? 0.0 : std::exp(n * std::log1p(-d.p)));
  d.guarantee = fmt("p = %.4g ", d.p) + source + ": " + detection_claim(d);
  if (d.method == "economics") d.guarantee += "; cheating on any number of epochs does not pay";
  d.guarantee += fmt(" (%.2f checks expected)", d.expected_checks);
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

// --- randomness -------------------------------------------------------------------------

namespace {

Bytes challenge_prefix(const Bytes& seed) {
  Bytes prefix(kStreamDomain.begin(), kStreamDomain.end());
  append_bytes(prefix, seed);
  return prefix;
}

}  // namespace

ChallengeRandom::ChallengeRandom(const Bytes& seed, std::string seed_hex)
    : seed_hex_(std::move(seed_hex)), stream_(challenge_prefix(seed)) {}

Result<ChallengeRandom> ChallengeRandom::from_os() {
  Bytes seed(kSecretSeedBytes);
  if (RAND_bytes(seed.data(), static_cast<int>(seed.size())) != 1) {
    return io_error("challenge seed: OpenSSL RAND_bytes could not read the OS CSPRNG");
  }
  return ChallengeRandom(seed, "");
}

Result<ChallengeRandom> ChallengeRandom::from_seed_hex(std::string_view hex) {
  Result<Bytes> seed = hex_decode(hex);
  if (!seed.ok()) return invalid_input("--seed: " + seed.error().message);
  if (seed->empty() || seed->size() > kMaxSeedBytes) {
    return invalid_input("--seed: expected 1 to 64 bytes of hex, got " +
                         std::to_string(seed->size()) + " bytes");
  }
  std::string canonical = hex_encode(*seed);
  return ChallengeRandom(*seed, std::move(canonical));
}

// --- movement ---------------------------------------------------------------------------

Result<double> fingerprint_movement(const fp::Fingerprint& previous,
                                    const fp::Fingerprint& current) {
  if (previous.plan.tensors.size() != current.plan.tensors.size() ||
      previous.values.size() != previous.plan.tensors.size() ||
      current.values.size() != current.plan.tensors.size()) {
    return rejected("tracking fingerprints sample different tensors");
  }
  double diff2 = 0.0, norm2 = 0.0;
  for (std::size_t t = 0; t < previous.plan.tensors.size(); ++t) {
    const fp::TensorSamples& a = previous.plan.tensors[t];
    const fp::TensorSamples& b = current.plan.tensors[t];
    if (a.name != b.name || a.dtype != b.dtype || a.indices != b.indices) {
      return rejected("tracking fingerprints sample different positions in tensor '" +
                      printable(b.name) + "'");
    }
    const std::size_t width = dtype_size(a.dtype);
    if (previous.values[t].size() != a.indices.size() * width ||
        current.values[t].size() != a.indices.size() * width) {
      return rejected("tracking fingerprint values of tensor '" + printable(b.name) +
                      "' have the wrong size");
    }
    for (std::size_t i = 0; i < a.indices.size(); ++i) {
      const double x = fp::decode_value(a.dtype, previous.values[t].data() + i * width);
      const double y = fp::decode_value(a.dtype, current.values[t].data() + i * width);
      if (!std::isfinite(x) || !std::isfinite(y)) return kInf;
      diff2 += (y - x) * (y - x);
      norm2 += x * x;
    }
  }
  if (norm2 == 0.0) return diff2 == 0.0 ? 0.0 : kInf;
  return std::sqrt(diff2 / norm2);
}

Result<std::vector<double>> tracking_movements(std::span<const SignedRecord> records) {
  std::vector<double> out;
  if (records.empty()) return out;
  std::vector<fp::Fingerprint> fps;
  fps.reserve(records.size());
  for (std::size_t e = 0; e < records.size(); ++e) {
    const std::string where = "epoch " + std::to_string(e) + ": tracking_fingerprint";
    if (records[e].record.epoch != e) {
      return internal_error("tracking_movements: record " + std::to_string(e) + " holds epoch " +
                            std::to_string(records[e].record.epoch));
    }
    Result<fp::Fingerprint> f = fp::fingerprint_from_json(records[e].record.tracking_fingerprint);
    if (!f.ok()) return rejected(where + ": " + f.error().message);
    if (e > 0 && f->plan != fps[0].plan) {
      return rejected(
          where +
          ": samples other positions than epoch 0's (tracking positions are fixed per task)");
    }
    fps.push_back(std::move(f).value());
    if (e > 0) {
      Result<double> m = fingerprint_movement(fps[e - 1], fps[e]);
      if (!m.ok()) return rejected(where + ": " + m.error().message);
      out.push_back(*m);
    }
  }
  return out;
}

// --- judging and drawing ----------------------------------------------------------------

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

EpochChance judge_epoch(std::span<const double> movements, std::uint64_t epoch, double p,
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
  EpochChance c = judge_epoch(movements_, next_epoch(), plan_.derivation.p, plan_.boost);
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

nlohmann::json json_number(double v) { return vt::json_number(v); }

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
