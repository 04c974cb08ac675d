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

}  // namespace vt
