#pragma once
// What the reference-replay tests share: Debian's interpreter with python3-torch, the scripts
// under scripts/, and the roots a workdir's log committed to.

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "common/json.h"

namespace vt::reference {

inline const std::string kPython = "/usr/bin/python3";

inline std::string script(const std::string& name) {
  return std::string(VT_SOURCE_DIR) + "/scripts/" + name;
}

// Whether Debian's interpreter imports `modules` ("torch, numpy"): without them the tests skip.
inline bool have_modules(const std::string& modules) {
  return std::system((kPython + " -c 'import " + modules + "' >/dev/null 2>&1").c_str()) == 0;
}

inline std::vector<std::string> committed_roots(const std::filesystem::path& log) {
  std::vector<std::string> roots;
  std::istringstream lines(*read_text_file(log));
  for (std::string line; std::getline(lines, line);) {
    roots.push_back(
        nlohmann::json::parse(line.substr(0, line.find('\t'))).at("root").get<std::string>());
  }
  return roots;
}

// (what was replayed, the reference's root, the committed root)
struct Compared {
  std::string what, reference, committed;
};

}  // namespace vt::reference
