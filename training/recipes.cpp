#include "training/recipes.h"

#include <fnmatch.h>

#include <algorithm>
#include <set>

namespace vt::training {

Result<std::vector<std::string>> resolve_no_decay(const std::string& rule,
                                                  const std::vector<ParameterInfo>& params) {
  std::set<std::string> names;
  if (rule == "1d") {
    for (const ParameterInfo& p : params) {
      if (p.shape.size() < 2) names.insert(p.name);
    }
  } else if (rule == "norm_and_bias") {
    for (const ParameterInfo& p : params) {
      const bool bias = p.name == "bias" || p.name.ends_with(".bias");
      if (bias || p.module.find("Norm") != std::string::npos) names.insert(p.name);
    }
  } else {
    std::vector<std::string> patterns;
    for (std::size_t from = 0; from <= rule.size();) {
      const std::size_t comma = std::min(rule.find(',', from), rule.size());
      patterns.push_back(rule.substr(from, comma - from));
      from = comma + 1;
    }
    for (const std::string& pattern : patterns) {
      if (pattern.empty())
        return invalid_input("--no-decay \"" + rule +
                             "\": an empty pattern (expected 1d, norm_and_bias or "
                             "comma-separated name patterns)");
      bool matched = false;
      for (const ParameterInfo& p : params) {
        if (::fnmatch(pattern.c_str(), p.name.c_str(), 0) != 0) continue;
        names.insert(p.name);
        matched = true;
      }
      if (!matched) {
        std::string some;
        for (const ParameterInfo& p : params) {
          if (some.size() > 200) {
            some += ", ...";
            break;
          }
          some += some.empty() ? "" : ", ";
          some += p.name;
        }
        std::string message = "--no-decay: pattern \"" + pattern;
        message += "\" matches no parameter of the model (its parameters: " + some + ")";
        return invalid_input(message);
      }
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

}  // namespace vt::training
