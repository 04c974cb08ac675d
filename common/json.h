#pragma once
// Canonical JSON: the byte form that ids and signatures are taken over (docs/task.md).
// nlohmann::json keeps object keys in a std::map, so dump() without indentation already gives
// bytewise-sorted keys and no whitespace; numbers print in their shortest round-trip form.

#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"

namespace vt {

inline std::string canonical_json(const nlohmann::json& value) {
  // Strict UTF-8: invalid input throws inside dump(), so the caller validated strings already.
  return value.dump();
}

// Parses without exceptions; `what` names the file or message in the error.
inline Result<nlohmann::json> parse_json(std::string_view text, std::string_view what) {
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return invalid_input(std::string(what) + ": not valid JSON");
  return value;
}

}  // namespace vt
