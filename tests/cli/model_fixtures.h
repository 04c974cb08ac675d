#pragma once
// The data and TorchScript modules of tests/cli/model_fixtures.py, written once per version of
// that script and shared by every test process (ctest runs each test in its own process, and
// importing torch costs seconds on a loaded machine).

#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/file_io.h"
#include "common/sha256.h"
#include "tests/test_util.h"

namespace vt::testing {

inline const std::string kPython = "/usr/bin/python3";

inline bool have_python_torch() {
  return std::system((kPython + " -c 'import torch, sklearn' >/dev/null 2>&1").c_str()) == 0;
}

// The folder holding the fixtures, or empty when they cannot be made (no python3-torch).
inline std::filesystem::path model_fixtures() {
  namespace fs = std::filesystem;
  const fs::path script = fs::path(VT_SOURCE_DIR) / "tests/cli/model_fixtures.py";
  auto text = read_file(script);
  if (!text.ok()) return {};
  fs::path dir =
      fs::temp_directory_path() / ("vt-model-fixtures-" + hex_encode(sha256(*text)).substr(0, 16));
  if (fs::exists(dir / "inplace_backward.pt")) return dir;
  if (!have_python_torch()) return {};
  // Written aside and renamed into place: parallel tests never see half a folder.
  const fs::path tmp = dir.string() + ".tmp" + std::to_string(::getpid());
  fs::create_directories(tmp);
  const std::string cmd = kPython + " " + script.string() + " " + tmp.string() + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return {};
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp, ec);  // another process won the race; its folder is the same
  return fs::exists(dir / "inplace_backward.pt") ? dir : fs::path();
}

}  // namespace vt::testing
