// libFuzzer target for the one bounded JSON parser every provider- or peer-written text goes
// through (common/json.h): any input is accepted or refused with an error, never a crash, and an
// accepted tree is never deeper than the bound, so walking it (dump, copy, compare, destroy:
// all recursive in nlohmann) cannot overflow the stack. The depth pre-count must agree with the
// tree: a parsed document deeper than it said is a bug.

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/json.h"

namespace {

std::size_t tree_depth(const nlohmann::json& value, std::size_t limit) {
  if (!value.is_structured()) return 0;
  if (limit == 0) std::abort();  // deeper than the bound: the pre-count let it through
  std::size_t deepest = 0;
  for (const auto& child : value) deepest = std::max(deepest, tree_depth(child, limit - 1));
  return deepest + 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (std::size_t bound : {std::size_t{4}, vt::kMaxJsonDepth}) {
    auto parsed = vt::parse_json_bounded(text, "fuzz", bound);
    if (!parsed.ok()) continue;
    if (tree_depth(*parsed, bound) > bound) std::abort();
    nlohmann::json copy = *parsed;
    if (copy != *parsed) std::abort();
    (void)copy.dump();
  }
  return 0;
}
