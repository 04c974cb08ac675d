#include "cli/suggest.h"

#include <algorithm>

namespace vt::cli {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // d[i][j]: distance between a's first i and b's first j characters.
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string closest_name(std::string_view word, const std::vector<std::string>& candidates) {
  const std::size_t allowed = std::min<std::size_t>(3, std::max<std::size_t>(1, word.size() / 3));
  std::string best;
  std::size_t best_distance = allowed + 1;
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

namespace {

std::vector<std::string> subcommand_names(const CLI::App& at) {
  std::vector<std::string> names;
  for (const CLI::App* sub : at.get_subcommands([](const CLI::App*) { return true; })) {
    if (!sub->get_group().empty()) names.push_back(sub->get_name());  // hidden ones are internal
  }
  return names;
}

std::vector<std::string> long_option_names(const CLI::App& at) {
  std::vector<std::string> names;
  for (const CLI::App* a = &at; a != nullptr; a = a->get_parent()) {  // globals apply everywhere
    for (const CLI::Option* o : a->get_options()) {
      for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
    }
  }
  names.push_back("--json");
  return names;
}

}  // namespace

std::string usage_hint(CLI::App& app, const std::vector<std::string>& args) {
  CLI::App* at = &app;
  std::string path = "veritrain";
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") break;
    if (word.rfind("--", 0) == 0) {
      const std::string name = word.substr(0, word.find('='));
      const CLI::Option* known = nullptr;
      for (const CLI::App* a = at; a != nullptr && known == nullptr; a = a->get_parent()) {
        known = a->get_option_no_throw(name);
      }
      if (known == nullptr && name != "--json" && name != "--help") {
        const std::string guess = closest_name(name, long_option_names(*at));
        return "unknown option " + name + " of '" + path + "'" +
               (guess.empty() ? "; '" + path + " --help' lists its options"
                              : "; did you mean " + guess + "?");
      }
      if (known != nullptr && known->get_items_expected_min() > 0 && name.size() == word.size())
        ++i;  // its value
      continue;
    }
    if (word.rfind('-', 0) == 0) continue;
    auto match = at->get_subcommands([&word](CLI::App* s) { return s->check_name(word); });
    if (CLI::App* sub = match.empty() ? nullptr : match.front(); sub != nullptr) {
      at = sub;
      path += " " + word;
      continue;
    }
    // A positional argument of the command reached, or a word where a command was expected.
    const std::vector<std::string> names = subcommand_names(*at);
    if (names.empty()) continue;
    const std::string guess = closest_name(word, names);
    const std::string wrong = "'" + word + "' is not a command of '" + path + "'";
    if (!guess.empty()) return wrong + "; did you mean '" + path + " " + guess + "'?";
    return wrong + "; '" + path + " --help' lists them";
  }
  return "";
}

}  // namespace vt::cli
