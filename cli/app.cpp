#include "cli/app.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/env_vars.h"
#include "cli/suggest.h"
#include "common/activity.h"

namespace vt::cli {
namespace {

constexpr int kUsageError = 2;

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("veritrain");
  logger->set_pattern("%^[%L]%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

// The one place an exception that escaped a module becomes an exit code: errors are values
// across module edges, so anything caught here is this machine's want of memory (exit 3) or a
// bug (exit 4), said with what the thread was doing, never a signal. Other threads end the same
// way through the terminate handler (common/activity.h).
Result<int> run_action(const Context& ctx) {
  handle_uncaught_exceptions("veritrain");
  try {
    return ctx.action();
  } catch (...) {
    return error_from_exception(std::current_exception());
  }
}

// "task show" for `veritrain task show ...`: the chain of subcommands CLI11 parsed.
std::string command_path(const CLI::App& app) {
  std::string path;
  const CLI::App* at = &app;
  while (true) {
    auto chosen = at->get_subcommands();
    if (chosen.empty()) break;
    at = chosen.front();
    path += (path.empty() ? "" : " ") + at->get_name();
  }
  return path;
}

// --json is global, but people write it where they write every other flag: after the command
// (`task show t.json --json`). It is taken out wherever it stands, up to a `--`.
std::vector<std::string> take_global_json(int argc, char** argv, bool& json) {
  std::vector<std::string> args;
  bool options_end = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") options_end = true;
    if (!options_end && a == "--json") {
      json = true;
      continue;
    }
    args.push_back(a);
  }
  return args;
}

void print_json_error(const std::string& message, int code) {
  std::cout << nlohmann::json{{"ok", false},
                              {"kind", "error"},
                              {"error", message},
                              {"exit_code", code}}
                   .dump()
            << std::endl;
}

}  // namespace

void emit(const Context& ctx, nlohmann::json json, const std::string& human) {
  if (ctx.json) {
    if (json.is_object()) {
      if (!json.contains("ok")) json["ok"] = true;
      if (!json.contains("kind")) json["kind"] = ctx.kind;
    }
    std::cout << json.dump() << "\n";
  } else {
    std::cout << (human.empty() ? json.dump(2) + "\n" : human);
  }
  std::cout.flush();
}

int run(int argc, char** argv, const CommandSet& commands) {
  CLI::App app{"veritrain: verifiable training on a compute marketplace", "veritrain"};
  Context ctx;
  bool version = false;
  std::vector<std::string> args = take_global_json(argc, argv, ctx.json);
  app.add_flag("--version", version,
               "Print veritrain's and LibTorch's versions and CUDA availability");
  app.add_flag("--json", ctx.json, "Print results as JSON on stdout (anywhere on the line)");
  app.add_option("--log-level", ctx.log_level, "Logging on stderr")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->envname("VERITRAIN_LOG_LEVEL");
  app.footer(
      "Exit codes: 0 success/accepted, 1 rejected, 2 usage or input error, "
      "3 I/O or network error, 4 internal error (a bug), 5 inconclusive (not judged), "
      "130 interrupted. See docs/cli.md.");
  commands.register_commands(app, ctx);
  bind_env_vars(app);

  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A mistyped word explains CLI11's complaint (an unknown flag leaves a required one unset):
    // say that word and its fix instead, once.
    const std::string hint = usage_hint(app, args);
    const std::string message = hint.empty() ? std::string(e.what()) : hint;
    if (ctx.json) print_json_error(message, kUsageError);
    std::cerr << "veritrain: " << message << "\n";
    if (hint.empty() && dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      std::cerr << "Not a veritrain command or option; run 'veritrain --help' for the list.\n";
    } else {
      std::cerr << "Run 'veritrain --help' (or COMMAND --help) for usage.\n";
    }
    return kUsageError;
  }
  setup_logging(ctx.log_level);
  if (version) return commands.version(ctx.json);
  if (!ctx.action) {
    if (ctx.json) print_json_error("no command given", kUsageError);
    std::cerr << app.help();
    return kUsageError;
  }
  ctx.kind = command_path(app);
  Result<int> result = run_action(ctx);
  if (!result.ok()) {
    const Error& err = result.error();
    if (ctx.json) print_json_error(err.message, exit_code(err.code));
    std::cerr << "veritrain: error: " << err.message << "\n";
    return exit_code(err.code);
  }
  return *result;
}

std::filesystem::path torch_program() {
  if (const char* env = std::getenv("VERITRAIN_TORCH"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "veritrain-torch";
}

}  // namespace vt::cli
