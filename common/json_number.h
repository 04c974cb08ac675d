#pragma once

#include <cmath>

#include <nlohmann/json.hpp>

namespace vt {

// A double for a JSON document people and programs read (verdicts, plans, --json output): the
// number when finite, else null. Strings such as "nan" in a number field break every consumer
// that expects a number or null (jq's arithmetic, JSON Schema "type": ["number", "null"]).
inline nlohmann::json json_number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// How a document that must round-trip exactly (the verifier's own resume state) writes a
// non-finite double: "nan", "inf" or "-inf". JsonFields::number_or_null reads both forms.
enum class NonFinite { kNull, kText };
inline nlohmann::json json_number(double v, NonFinite mode) {
  if (std::isfinite(v) || mode == NonFinite::kNull) return json_number(v);
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

}  // namespace vt
