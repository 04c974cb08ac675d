#include "common/json.h"

namespace vt {

std::size_t json_nesting_depth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > deepest) deepest = depth;
        if (deepest > limit) return limit + 1;
        break;
      case ']':
      case '}':
        // Unbalanced closers are the parser's to refuse; the count only has to stay sane.
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

Result<nlohmann::json> parse_json_bounded(std::string_view text, std::string_view what,
                                          std::size_t max_depth,
                                          const nlohmann::json::parser_callback_t& callback) {
  if (json_nesting_depth(text, max_depth) > max_depth) {
    return invalid_input(std::string(what) + ": JSON nested deeper than " +
                         std::to_string(max_depth) + " levels");
  }
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text, callback, /*allow_exceptions=*/true);
  } catch (const nlohmann::json::exception& e) {
    return invalid_input(std::string(what) + ": not valid JSON: " + e.what());
  }
  if (value.is_discarded()) return invalid_input(std::string(what) + ": not valid JSON");
  return value;
}

}  // namespace vt
