#include "fingerprint/compare.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "common/json_number.h"

namespace vt::fp {
namespace {

double half_to_double(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);  // zero or subnormal
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? HUGE_VAL : std::nan("");
  } else {
    magnitude = std::ldexp(mantissa + 1024, exponent - 25);
  }
  return (h & 0x8000) ? -magnitude : magnitude;
}

Status check_same_plan(const SamplePlan& a, const SamplePlan& b) {
  if (a.seed != b.seed) return invalid_input("compare: the fingerprints have different seeds");
  if (a.tensors.size() != b.tensors.size()) {
    return invalid_input("compare: the fingerprints sample " + std::to_string(a.tensors.size()) +
                         " and " + std::to_string(b.tensors.size()) + " tensors");
  }
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    if (a.tensors[i] != b.tensors[i]) {
      return invalid_input("compare: the fingerprints differ in which positions of tensor \"" +
                           a.tensors[i].name + "\" (or its dtype or size) they sample");
    }
  }
  return {};
}

Status check_tolerance(const Tolerance& t) {
  const std::pair<const char*, double> fields[] = {
      {"atol", t.atol},
      {"rtol", t.rtol},
      {"rel_l2", t.rel_l2},
      {"max_outlier_fraction", t.max_outlier_fraction}};
  for (auto [name, v] : fields) {
    if (!std::isfinite(v) || v < 0) {
      return invalid_input(std::string("compare: tolerance.") + name +
                           " must be a finite number >= 0, got " + std::to_string(v));
    }
  }
  return {};
}

bool nonfinite_match(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b;  // both infinite with the same sign; never a finite value and an infinity
}

}  // namespace

std::string_view compare_mode_name(CompareMode mode) {
  return mode == CompareMode::kExact ? "exact" : "tolerance";
}

double decode_value(DType dtype, const std::uint8_t* bytes) {
  switch (dtype) {
    case DType::kF64:
      return std::bit_cast<double>(get_u64le(bytes));
    case DType::kF32:
      return std::bit_cast<float>(get_u32le(bytes));
    case DType::kF16:
      return half_to_double(static_cast<std::uint16_t>(bytes[0] | bytes[1] << 8));
    case DType::kBF16:
      return std::bit_cast<float>(std::uint32_t{bytes[0]} << 16 | std::uint32_t{bytes[1]} << 24);
    default:
      return std::nan("");
  }
}

Result<Comparison> compare(const Fingerprint& replay, const Fingerprint& committed,
                           CompareMode mode, const Tolerance& tolerance) {
  VT_RETURN_IF_ERROR(check_same_plan(replay.plan, committed.plan));
  VT_RETURN_IF_ERROR(check_tolerance(tolerance));
  if (replay.values.size() != replay.plan.tensors.size() ||
      committed.values.size() != committed.plan.tensors.size()) {
    return invalid_input(
        "compare: a fingerprint has values for a different number of tensors than its plan");
  }
  Comparison c;
  c.mode = mode;
  c.thresholds = tolerance;
  // Squares of f64 values overflow double; long double holds them.
  long double diff_sq = 0, ref_sq = 0;
  for (std::size_t t = 0; t < replay.plan.tensors.size(); ++t) {
    const TensorSamples& ts = replay.plan.tensors[t];
    const std::size_t size = dtype_size(ts.dtype);
    const Bytes& av = replay.values[t];
    const Bytes& bv = committed.values[t];
    if (av.size() != ts.indices.size() * size || bv.size() != av.size()) {
      return invalid_input("compare: tensor \"" + ts.name +
                           "\" has the wrong number of value bytes");
    }
    for (std::size_t i = 0; i < ts.indices.size(); ++i) {
      const std::uint8_t* pa = av.data() + i * size;
      const std::uint8_t* pb = bv.data() + i * size;
      const double a = decode_value(ts.dtype, pa);
      const double b = decode_value(ts.dtype, pb);
      bool ok;
      if (std::isfinite(a) && std::isfinite(b)) {
        const double d = std::fabs(a - b);
        c.max_abs_diff = std::max(c.max_abs_diff, d);
        if (b != 0) c.max_rel_diff = std::max(c.max_rel_diff, d / std::fabs(b));
        diff_sq += static_cast<long double>(a - b) * (a - b);
        ref_sq += static_cast<long double>(b) * b;
        ok = mode == CompareMode::kExact ? std::equal(pa, pa + size, pb)
                                         : d <= tolerance.atol + tolerance.rtol * std::fabs(b);
      } else {
        ok = mode == CompareMode::kExact ? std::equal(pa, pa + size, pb) : nonfinite_match(a, b);
        if (!ok && !nonfinite_match(a, b)) ++c.nonfinite_mismatches;
      }
      if (ok) continue;
      ++c.mismatches;
      if (!c.first_mismatch) {
        c.first_mismatch = MismatchLocation{ts.name,
                                            ts.indices[i],
                                            hex_encode(ByteSpan(pa, size)),
                                            hex_encode(ByteSpan(pb, size)),
                                            a,
                                            b};
      }
    }
    c.compared += ts.indices.size();
  }
  if (ref_sq > 0) {
    c.rel_l2 = static_cast<double>(std::sqrt(diff_sq) / std::sqrt(ref_sq));
  } else {
    c.rel_l2 = diff_sq > 0 ? HUGE_VAL : 0.0;
  }
  if (mode == CompareMode::kExact) {
    c.match = c.mismatches == 0;
  } else {
    c.allowed_mismatches = static_cast<std::uint64_t>(
        std::floor(tolerance.max_outlier_fraction * static_cast<double>(c.compared)));
    c.match = c.nonfinite_mismatches == 0 && c.mismatches <= c.allowed_mismatches &&
              c.rel_l2 <= tolerance.rel_l2;
  }
  return c;
}

nlohmann::json comparison_to_json(const Comparison& c, NonFinite non_finite) {
  const auto number = [non_finite](double v) { return json_number(v, non_finite); };
  nlohmann::json first = nullptr;
  if (c.first_mismatch) {
    const MismatchLocation& m = *c.first_mismatch;
    first = {{"tensor", m.tensor},           {"index", m.index},
             {"replay_bits", m.replay_bits}, {"committed_bits", m.committed_bits},
             {"replay", number(m.replay)},   {"committed", number(m.committed)}};
  }
  return {{"mode", compare_mode_name(c.mode)},
          {"compared", c.compared},
          {"mismatches", c.mismatches},
          {"nonfinite_mismatches", c.nonfinite_mismatches},
          {"allowed_mismatches", c.allowed_mismatches},
          {"max_abs_diff", number(c.max_abs_diff)},
          {"max_rel_diff", number(c.max_rel_diff)},
          {"rel_l2", number(c.rel_l2)},
          {"first_mismatch", std::move(first)},
          {"thresholds",
           {{"atol", c.thresholds.atol},
            {"rtol", c.thresholds.rtol},
            {"rel_l2", c.thresholds.rel_l2},
            {"max_outlier_fraction", c.thresholds.max_outlier_fraction}}},
          {"match", c.match}};
}

Result<Comparison> comparison_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return invalid_input(where + ": expected a comparison object");
  const JsonFields r(j, where);
  Comparison c;
  std::string mode;
  VT_RETURN_IF_ERROR(r.string("mode", mode, true));
  if (mode != "exact" && mode != "tolerance")
    return r.wrong("mode", "\"exact\" or \"tolerance\"", mode);
  c.mode = mode == "exact" ? CompareMode::kExact : CompareMode::kTolerance;
  VT_RETURN_IF_ERROR(r.unsigned64("compared", c.compared, true));
  VT_RETURN_IF_ERROR(r.unsigned64("mismatches", c.mismatches, true));
  VT_RETURN_IF_ERROR(r.unsigned64("nonfinite_mismatches", c.nonfinite_mismatches, true));
  VT_RETURN_IF_ERROR(r.unsigned64("allowed_mismatches", c.allowed_mismatches, true));
  VT_RETURN_IF_ERROR(r.number_or_null("max_abs_diff", c.max_abs_diff, true));
  VT_RETURN_IF_ERROR(r.number_or_null("max_rel_diff", c.max_rel_diff, true));
  VT_RETURN_IF_ERROR(r.number_or_null("rel_l2", c.rel_l2, true));
  VT_RETURN_IF_ERROR(r.boolean("match", c.match, true));
  VT_ASSIGN_OR_RETURN(JsonFields t, r.child("thresholds", true));
  VT_RETURN_IF_ERROR(t.number("atol", c.thresholds.atol, true));
  VT_RETURN_IF_ERROR(t.number("rtol", c.thresholds.rtol, true));
  VT_RETURN_IF_ERROR(t.number("rel_l2", c.thresholds.rel_l2, true));
  VT_RETURN_IF_ERROR(t.number("max_outlier_fraction", c.thresholds.max_outlier_fraction, true));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* first, r.find("first_mismatch", true, "an object"));
  if (!first->is_null()) {
    VT_ASSIGN_OR_RETURN(JsonFields m, r.child("first_mismatch", true));
    MismatchLocation loc;
    VT_RETURN_IF_ERROR(m.string("tensor", loc.tensor, true));
    VT_RETURN_IF_ERROR(m.unsigned64("index", loc.index, true));
    VT_RETURN_IF_ERROR(m.string("replay_bits", loc.replay_bits, true));
    VT_RETURN_IF_ERROR(m.string("committed_bits", loc.committed_bits, true));
    VT_RETURN_IF_ERROR(m.number_or_null("replay", loc.replay, true));
    VT_RETURN_IF_ERROR(m.number_or_null("committed", loc.committed, true));
    c.first_mismatch = std::move(loc);
  }
  return c;
}

}  // namespace vt::fp
