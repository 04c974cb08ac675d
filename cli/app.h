#pragma once
// The `veritrain` command line: one CLI11 app, one register_* function per command group.
// Commands never print errors themselves: they return a Result and run() turns it into a
// message on stderr and an exit code (docs/cli.md).

#include <charconv>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command_table.h"
#include "common/result.h"

namespace vt::cli {

// `verify` and `audit` could not judge: the verifier cannot reproduce the provider's arithmetic
// environment (docs/environment.md). Not an error class: nothing was found wrong with anyone.
inline constexpr int kExitInconclusive = 5;

struct Context {
  bool json = false;               // results as JSON on stdout
  std::string log_level = "info";  // stderr logging
  std::string kind;                // the command's path, "task show": every JSON result's "kind"
  std::function<Result<int>()> action;  // the chosen command; its value is the exit code
};

// Prints a command's result: `json` with --json, else `human` (if empty, the JSON pretty-printed).
// The JSON gets "ok": true and "kind": ctx.kind unless it has its own (docs/cli.md, "JSON").
void emit(const Context& ctx, nlohmann::json json, const std::string& human);

void register_keygen(CLI::App& app, Context& ctx);
void register_task(CLI::App& app, Context& ctx);
void register_estimate(CLI::App& app, Context& ctx);
void register_train(CLI::App& app, Context& ctx);
void register_log(CLI::App& app, Context& ctx);
void register_inspect(CLI::App& app, Context& ctx);
void register_serve(CLI::App& app, Context& ctx);
void register_verify(CLI::App& app, Context& ctx);
void register_audit(CLI::App& app, Context& ctx);
void register_dispute(CLI::App& app, Context& ctx);  // `trace` and `dispute`
void register_referee(CLI::App& app, Context& ctx);  // cmd_referee.cpp, torch-free
void register_verdict(CLI::App& app, Context& ctx);  // cmd_verdict.cpp, torch-free
void register_plan(CLI::App& app, Context& ctx);
void register_demo(CLI::App& app, Context& ctx);
void register_task_show(CLI::App& task, Context& ctx);  // cmd_task_show.cpp, torch-free
void register_export(CLI::App& app, Context& ctx);

// The commands one executable offers (cli/commands_*.cpp): `veritrain` (torch-free, starts in
// milliseconds) and `veritrain-torch` (everything, LibTorch linked) share run() below.
struct CommandSet {
  void (*register_commands)(CLI::App& app, Context& ctx) = nullptr;
  int (*version)(bool json) = nullptr;  // --version
};
const CommandSet& full_commands();   // commands_full.cpp
const CommandSet& light_commands();  // commands_light.cpp

int run(int argc, char** argv, const CommandSet& commands);

// veritrain-torch: $VERITRAIN_TORCH when set, else the one beside this executable (this one
// itself when it is veritrain-torch). `veritrain` execs it (torch_forward.h); `serve` runs it
// to answer trace requests.
std::filesystem::path torch_program();

// `text` as a whole integer in `base`, or nothing: no sign where T is unsigned, no blanks, no
// trailing characters, no overflow.
template <typename T>
std::optional<T> parse_integer(std::string_view text, int base = 10) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace vt::cli
