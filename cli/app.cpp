#include "cli/app.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "training/runtime.h"

namespace vt::cli {
namespace {

constexpr int kUsageError = 2;

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("veritrain");
  logger->set_pattern("%^[%L]%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

int print_version(bool json) {
  training::RuntimeInfo rt = training::runtime_info();
  if (json) {
    std::cout << nlohmann::json{{"veritrain", VT_VERSION},
                                {"libtorch", rt.torch_version},
                                {"cuda_available", rt.cuda_available},
                                {"cuda_devices", rt.cuda_device_count}}
                     .dump()
              << "\n";
  } else {
    std::cout << "veritrain " << VT_VERSION << "\nlibtorch " << rt.torch_version << "\ncuda "
              << (rt.cuda_available ? "available (" + std::to_string(rt.cuda_device_count) + " devices)"
                                    : std::string("unavailable"))
              << "\n";
  }
  return 0;
}

// The one place an exception that escaped a module becomes an exit code: errors are values
// across module edges, so anything caught here is a bug (exit 4), reported, never a signal.
Result<int> run_action(const Context& ctx) {
  try {
    return ctx.action();
  } catch (const std::bad_alloc&) {
    return internal_error("out of memory (an allocation failed); this is a bug: every size a peer "
                          "declares should be bounded before it is allocated");
  } catch (const std::exception& e) {
    return internal_error(std::string("unexpected exception: ") + e.what());
  } catch (...) {
    return internal_error("unexpected exception of unknown type");
  }
}

}  // namespace

void emit(const Context& ctx, const nlohmann::json& json, const std::string& human) {
  if (ctx.json) {
    std::cout << json.dump() << "\n";
  } else {
    std::cout << (human.empty() ? json.dump(2) + "\n" : human);
  }
  std::cout.flush();
}

int run(int argc, char** argv) {
  CLI::App app{"veritrain: verifiable training on a compute marketplace", "veritrain"};
  Context ctx;
  bool version = false;
  app.add_flag("--version", version, "Print veritrain's and LibTorch's versions and CUDA availability");
  app.add_flag("--json", ctx.json, "Print results as JSON on stdout");
  app.add_option("--log-level", ctx.log_level, "Logging on stderr")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.footer("Exit codes: 0 success/accepted, 1 rejected, 2 usage or input error, "
             "3 I/O or network error, 4 internal error (a bug). See docs/cli.md.");

  register_keygen(app, ctx);
  register_task(app, ctx);
  register_estimate(app, ctx);
  register_train(app, ctx);
  register_log(app, ctx);
  register_serve(app, ctx);
  register_verify(app, ctx);
  register_demo(app, ctx);
  register_export(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "veritrain: " << e.what() << "\n";
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      std::cerr << "Not a veritrain command or option; run 'veritrain --help' for the list.\n";
    } else {
      std::cerr << "Run with --help for usage.\n";
    }
    return kUsageError;
  }
  setup_logging(ctx.log_level);
  if (version) return print_version(ctx.json);
  if (!ctx.action) {
    std::cerr << app.help();
    return kUsageError;
  }
  Result<int> result = run_action(ctx);
  if (!result.ok()) {
    const Error& err = result.error();
    if (ctx.json) {
      std::cout << nlohmann::json{{"error", err.message}, {"exit_code", exit_code(err.code)}}.dump()
                << "\n";
    }
    std::cerr << "veritrain: error: " << err.message << "\n";
    return exit_code(err.code);
  }
  return *result;
}

}  // namespace vt::cli
