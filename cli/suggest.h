#pragma once
// "Did you mean" for mistyped commands and flags: the closest name by edit distance.

#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace vt::cli {

// Edit distance: insertions, deletions, substitutions and swaps of neighbours, each costing 1
// ("shwo" is one edit from "show").
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is close enough to be a typo (at most a third of its
// length, and at most 3, edits away), else "".
std::string closest_name(std::string_view word, const std::vector<std::string>& candidates);

// Walks `args` (argv without the program name) down `app`'s subcommands and, at the first word
// that is neither a subcommand, an option of the command reached nor a value, says what was
// typed wrong and the fix, once: "'shwo' is not a command of 'veritrain task'; did you mean
// 'veritrain task show'?", "unknown option --taks of 'veritrain train'; did you mean --task?".
// "" when every word is known: CLI11's own message (a missing required option) stands then.
std::string usage_hint(CLI::App& app, const std::vector<std::string>& args);

}  // namespace vt::cli
