#pragma once
// Canonical JSON: the byte form that ids and signatures are taken over (docs/task.md).
// nlohmann::json keeps object keys in a std::map, so dump() without indentation already gives
// bytewise-sorted keys and no whitespace; numbers print in their shortest round-trip form.
//
// Every JSON text a peer or a provider wrote (log records, frames, the task, safetensors headers,
// evidence, verdicts) is parsed through parse_json_bounded(): nlohmann's parser is iterative, but
// dump(), copies and comparisons recurse, so a document nested 100,000 deep would overflow the
// stack on the first walk. The depth is checked on the raw text before nlohmann sees it.

#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"

namespace vt {

// Deeper than any format of ours nests (a task is 4 levels, a verdict 5), far below what
// recursion over a tree can take on a default thread stack.
inline constexpr std::size_t kMaxJsonDepth = 64;

inline std::string canonical_json(const nlohmann::json& value) {
  // Strict UTF-8: invalid input throws inside dump(), so the caller validated strings already.
  return value.dump();
}

// The deepest nesting of arrays and objects in `text`, counted without parsing (brackets inside
// strings do not count); stops counting once `limit` is passed and returns limit + 1.
std::size_t json_nesting_depth(std::string_view text, std::size_t limit = kMaxJsonDepth);

// Parses without exceptions; `what` names the file or message in the error. Refuses a text
// nested deeper than `max_depth` before building any tree. `callback`, if given, sees each
// parse event (as nlohmann's parser callback) and can veto a value.
Result<nlohmann::json> parse_json_bounded(std::string_view text, std::string_view what,
                                          std::size_t max_depth = kMaxJsonDepth,
                                          const nlohmann::json::parser_callback_t& callback = nullptr);

inline Result<nlohmann::json> parse_json(std::string_view text, std::string_view what) {
  return parse_json_bounded(text, what);
}

}  // namespace vt
