#pragma once
// Comparing a replayed fingerprint with a committed one (docs/fingerprint.md, "Comparison").
//
// Exact mode: every sampled value must be bit-identical; -0.0 and +0.0 differ, NaNs with
// different payloads differ. Tolerance mode, with a = replay and b = committed, decoded to
// double: a finite pair matches iff |a - b| <= atol + rtol * |b| (so -0.0 == +0.0 and
// subnormals compare by value); NaN matches only NaN, +Inf only +Inf, -Inf only -Inf, and a
// non-finite value never matches a finite one. The whole passes iff no non-finite value is
// mismatched, mismatches <= floor(max_outlier_fraction * compared), and the relative L2 error
// ||a - b|| / ||b|| over finite pairs is <= rel_l2.

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "common/json_number.h"
#include "fingerprint/fingerprint.h"

namespace vt::fp {

enum class CompareMode { kExact, kTolerance };

std::string_view compare_mode_name(CompareMode mode);  // "exact" | "tolerance"

// Field names as in the task's "tolerance" object.
struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
  double rel_l2 = 0.0;
  double max_outlier_fraction = 0.0;
};

struct MismatchLocation {
  std::string tensor;
  std::uint64_t index = 0;  // flat element index in the tensor
  std::string replay_bits;  // little-endian hex, as in the fingerprint
  std::string committed_bits;
  double replay = 0.0;
  double committed = 0.0;
};

// What a verdict and an evidence file quote.
struct Comparison {
  CompareMode mode = CompareMode::kExact;
  Tolerance thresholds;  // as given; unused by exact mode but recorded
  std::uint64_t compared = 0;
  std::uint64_t mismatches = 0;  // exact: bit differences; tolerance: per-value failures
  std::uint64_t nonfinite_mismatches = 0;
  std::uint64_t allowed_mismatches = 0;            // exact: 0
  double max_abs_diff = 0.0;                       // over finite pairs
  double max_rel_diff = 0.0;                       // |a - b| / |b| over finite pairs with b != 0
  double rel_l2 = 0.0;                             // +inf when ||b|| = 0 and ||a - b|| > 0
  std::optional<MismatchLocation> first_mismatch;  // in plan order
  bool match = false;
};

// Errors (invalid input) when the two fingerprints do not sample the same positions, or when
// a tolerance threshold is negative or not finite.
Result<Comparison> compare(const Fingerprint& replay, const Fingerprint& committed,
                           CompareMode mode, const Tolerance& tolerance = {});

// The one schema of a comparison, in verdicts, evidence and the verifier's saved state
// (docs/fingerprint.md, "Comparison"). Non-finite numbers are written as null and read back as
// NaN. Reading names `where` and the field in its errors (invalid input).
// Non-finite values are null in verdicts (kNull); the verifier's resume state keeps them exactly.
nlohmann::json comparison_to_json(const Comparison& c, NonFinite non_finite = NonFinite::kNull);
Result<Comparison> comparison_from_json(const nlohmann::json& j, const std::string& where);

// One value in its little-endian byte form, decoded exactly to double. `dtype` must be F64,
// F32, F16 or BF16.
double decode_value(DType dtype, const std::uint8_t* bytes);

}  // namespace vt::fp
