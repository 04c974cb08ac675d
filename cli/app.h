#pragma once
// The `veritrain` command line: one CLI11 app, one register_* function per command group.
// Commands never print errors themselves: they return a Result and run() turns it into a
// message on stderr and an exit code (docs/cli.md).

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"

namespace vt::cli {

struct Context {
  bool json = false;               // results as JSON on stdout
  std::string log_level = "info";  // stderr logging
  std::function<Result<int>()> action;  // the chosen command; its value is the exit code
};

// Prints a command's result: `json` with --json, else `human` (if empty, the JSON pretty-printed).
void emit(const Context& ctx, const nlohmann::json& json, const std::string& human);

void register_keygen(CLI::App& app, Context& ctx);
void register_task(CLI::App& app, Context& ctx);
void register_estimate(CLI::App& app, Context& ctx);
void register_train(CLI::App& app, Context& ctx);
void register_log(CLI::App& app, Context& ctx);
void register_serve(CLI::App& app, Context& ctx);
void register_verify(CLI::App& app, Context& ctx);
void register_demo(CLI::App& app, Context& ctx);

int run(int argc, char** argv);

}  // namespace vt::cli
