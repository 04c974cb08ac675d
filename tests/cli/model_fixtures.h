#pragma once
// The data and TorchScript modules of tests/cli/model_fixtures.py, written once per version of
// that script and shared by every test process (tests/cli/python_made.h).

#include <filesystem>
#include <string>

#include "tests/cli/python_made.h"

namespace vt::testing {

// The folder holding the fixtures, or empty when they cannot be made (no python3-torch).
inline std::filesystem::path model_fixtures() {
  std::string error;
  return python_made("model_fixtures.py", {}, "torch, sklearn", error);
}

}  // namespace vt::testing
