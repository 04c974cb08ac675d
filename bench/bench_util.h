#pragma once
// Every bench_<module> prints one "key: value" line per figure, or with --json the same keys as
// one JSON object. Baselines are measured in the same run and reported beside our figures.

#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace vt::bench {

class Report {
 public:
  Report(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) json_ |= std::strcmp(argv[i], "--json") == 0;
  }
  bool json() const { return json_; }
  void add(const std::string& key, const nlohmann::json& value) {
    out_[key] = value;
    if (!json_) std::cout << key << ": " << value.dump() << std::endl;
  }
  ~Report() {
    if (json_) std::cout << out_.dump() << std::endl;
  }

 private:
  bool json_ = false;
  nlohmann::json out_ = nlohmann::json::object();
};

// Parses `app` (every bench also takes --json, read by Report) the way the veritrain binary
// parses its flags. Returns the exit code when the program should stop (--help, or a flag that
// is wrong, which CLI11 names), nothing to go on.
inline std::optional<int> parse_flags(CLI::App& app, int argc, char** argv) {
  app.add_flag("--json")->description("Print the figures as one JSON object");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // usage errors exit 2, as the veritrain binary's do
  }
  return std::nullopt;
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Best-of-n wall time of fn(), in seconds: the least disturbed run is the fairest comparison.
template <typename F>
double best_seconds(int n, F&& fn) {
  double best = 1e300;
  for (int i = 0; i < n; ++i) {
    auto t = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, seconds_since(t));
  }
  return best;
}

}  // namespace vt::bench
