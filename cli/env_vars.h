#pragma once
// Environment variables for the flags people script (docs/cli.md, "Environment"): a flag on the
// command line wins over its variable.

#include <CLI/CLI.hpp>

namespace vt::cli {

// Names each scripted flag's variable on the commands that have it; call after registration.
void bind_env_vars(CLI::App& app);

}  // namespace vt::cli
