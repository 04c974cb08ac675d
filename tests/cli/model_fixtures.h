#pragma once
// The data and TorchScript modules of tests/cli/model_fixtures.py, written once per version of
// that script and shared by every test process (tests/cli/python_made.h).

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/cli/python_made.h"

namespace vt::testing {

// The folder holding the fixtures, or empty when they cannot be made: without python3-torch the
// caller skips; a script that fails also fails the test that asked, so it cannot pass as skipped.
inline std::filesystem::path model_fixtures() {
  std::string error;
  std::filesystem::path made = python_made("model_fixtures.py", {}, "torch, sklearn", error);
  if (!error.empty()) ADD_FAILURE() << error;
  return made;
}

}  // namespace vt::testing
