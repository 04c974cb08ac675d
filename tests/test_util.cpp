#include "tests/test_util.h"

#include <sys/wait.h>

#include <fstream>
#include <sstream>

namespace vt::testing {

static std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CommandResult run_command(const std::string& command_line, const std::filesystem::path& scratch) {
  auto out = scratch / "cmd.stdout";
  auto err = scratch / "cmd.stderr";
  // Keys a command keeps in the user's config folder (the verifier's) land in the scratch folder,
  // never in the real one.
  // The command line is grouped: without the braces the redirections would apply to the last
  // command of an `a && b > file` line only, and take its output away from `file`.
  std::string full = "export XDG_CONFIG_HOME=" + (scratch / ".config").string() + "; { " +
                     command_line + "\n} >" + out.string() + " 2>" + err.string() + " </dev/null";
  int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace vt::testing
