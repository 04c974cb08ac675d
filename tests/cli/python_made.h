#pragma once
// Models and data that a Python script of tests/cli/ writes with Debian's torch, made once per
// version of the script (and of the scripts/ files it imports) and shared by every test process:
// ctest runs most tests in a process of their own, and each run of such a script imports torch and
// scripts its modules, seconds on a loaded machine.

#include <unistd.h>

#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>

#include "common/file_io.h"
#include "common/sha256.h"
#include "tests/test_util.h"

namespace vt::testing {

inline const std::string kPython = "/usr/bin/python3";

// Whether Debian's interpreter has `modules` ("torch, sklearn") installed; without them the tests
// that need them skip. Looked up, not imported: importing torch alone takes seconds.
inline bool have_python_modules(const std::string& modules) {
  std::string names;
  for (char c : modules) names += c == ',' ? ' ' : c;
  const std::string cmd = kPython +
                          " -c 'import importlib.util as u, sys; "
                          "sys.exit(0 if all(u.find_spec(m) for m in sys.argv[1:]) else 1)' " +
                          names + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// The folder that tests/cli/`script` writes when run as `script OUTDIR SCRIPTS_DIR` (scripts/, for
// the helpers it imports, named in `imports`). Empty when it cannot be made: `modules` are not
// installed (`error` stays empty: the caller skips), or the script failed (`error` says how).
inline std::filesystem::path python_made(const std::string& script,
                                         std::initializer_list<const char*> imports,
                                         const std::string& modules, std::string& error) {
  namespace fs = std::filesystem;
  error.clear();
  const fs::path source = fs::path(VT_SOURCE_DIR) / "tests/cli" / script;
  const fs::path scripts = fs::path(VT_SOURCE_DIR) / "scripts";
  auto text = read_file(source);
  if (!text.ok()) {
    error = text.error().message;
    return {};
  }
  Bytes versions = *text;
  for (const char* name : imports) {
    auto helper = read_file(scripts / name);
    if (!helper.ok()) {
      error = helper.error().message;
      return {};
    }
    versions.insert(versions.end(), helper->begin(), helper->end());
  }
  fs::path dir = fs::temp_directory_path() / ("vt-" + fs::path(script).stem().string() + "-" +
                                              hex_encode(sha256(versions)).substr(0, 16));
  if (fs::exists(dir)) return dir;
  if (!have_python_modules(modules)) return {};
  // Written aside and renamed into place: parallel tests never see half a folder.
  const fs::path tmp = dir.string() + ".tmp" + std::to_string(::getpid());
  fs::create_directories(tmp);
  const std::string log = (tmp / "python.log").string();
  const std::string cmd = "cd '" + tmp.string() + "' && " + kPython + " " + source.string() + " " +
                          tmp.string() + " " + scripts.string() + " >'" + log + "' 2>&1";
  std::error_code ec;
  if (std::system(cmd.c_str()) != 0) {
    auto said = read_text_file(log);
    error = script + " failed: " + (said.ok() ? *said : std::string("(no output)"));
    fs::remove_all(tmp, ec);
    return {};
  }
  fs::remove(log, ec);
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp, ec);  // another process won the race; its folder is the same
  return fs::exists(dir) ? dir : fs::path();
}

// A folder of this test process's own holding copies of what `script` makes (python_made), where
// its tests write beside them; null when it cannot be made (`error` says why if the script failed).
inline std::unique_ptr<ScratchDir> copy_of_made(const std::string& script,
                                                std::initializer_list<const char*> imports,
                                                const std::string& modules, std::string& error) {
  const std::filesystem::path made = python_made(script, imports, modules, error);
  if (made.empty()) return nullptr;
  auto dir = std::make_unique<ScratchDir>();
  std::filesystem::copy(
      made, dir->path(),
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  return dir;
}

}  // namespace vt::testing
