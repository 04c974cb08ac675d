#pragma once
// What the reference-replay tests share: Debian's interpreter with python3-torch, the
// independent implementations under reference/, and the roots a workdir's log committed to.

#include <filesystem>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "common/json.h"
#include "tests/cli/python_made.h"

namespace vt::reference {

using testing::kPython;

inline std::string script(const std::string& name) {
  return std::string(VT_SOURCE_DIR) + "/reference/" + name;
}

// The roots a commitment log holds, in order; none if `log` cannot be read.
inline std::vector<std::string> committed_roots(const std::filesystem::path& log) {
  std::vector<std::string> roots;
  auto text = read_text_file(log);
  if (!text) return roots;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    roots.push_back(
        nlohmann::json::parse(line.substr(0, line.find('\t'))).at("root").get<std::string>());
  }
  return roots;
}

// Whether this CPU runs ATen's avx512 kernels (what ATEN_CPU_CAPABILITY=avx512 needs).
inline bool cpu_runs_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("fma");
}

// One machine posing as another: an ATen CPU level (which also caps veritrain's kernels) and a
// thread count.
struct Setting {
  std::string capability;
  int threads;
  std::string name() const { return capability + "-" + std::to_string(threads); }
  std::string env() const { return "env ATEN_CPU_CAPABILITY=" + capability + " "; }
};

// default, avx2 and (where the CPU has it) avx512, each at every thread count of `threads`.
inline std::vector<Setting> settings(std::initializer_list<int> threads) {
  std::vector<Setting> out;
  for (const char* cap : {"default", "avx2", "avx512"}) {
    if (std::string(cap) == "avx512" && !cpu_runs_avx512()) continue;
    for (int t : threads) out.push_back({cap, t});
  }
  return out;
}

// (what was replayed, the reference's root, the committed root)
struct Compared {
  std::string what, reference, committed;
};

}  // namespace vt::reference
