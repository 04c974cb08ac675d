// Every command, for `veritrain-torch`: the program `veritrain` hands the LibTorch commands to.
#include <iostream>

#include "cli/app.h"
#include "training/runtime.h"

namespace vt::cli {
namespace {

// In command_table()'s order, as commands_light.cpp: both executables' --help read the same.
void register_all(CLI::App& app, Context& ctx) {
  register_keygen(app, ctx);
  register_task(app, ctx);
  register_estimate(app, ctx);
  register_train(app, ctx);
  register_log(app, ctx);
  register_inspect(app, ctx);
  register_serve(app, ctx);
  register_verify(app, ctx);
  register_audit(app, ctx);
  register_dispute(app, ctx);
  register_referee(app, ctx);
  register_verdict(app, ctx);
  register_plan(app, ctx);
  register_export(app, ctx);
  register_demo(app, ctx);
}

int print_version(bool json) {
  training::RuntimeInfo rt = training::runtime_info();
  if (json) {
    std::cout << nlohmann::json{{"ok", true},
                                {"kind", "version"},
                                {"veritrain", VT_VERSION},
                                {"libtorch", rt.torch_version},
                                {"cuda_available", rt.cuda_available},
                                {"cuda_devices", rt.cuda_device_count}}
                     .dump()
              << "\n";
  } else {
    std::cout << "veritrain " << VT_VERSION << "\nlibtorch " << rt.torch_version << "\ncuda "
              << (rt.cuda_available
                      ? "available (" + std::to_string(rt.cuda_device_count) + " devices)"
                      : std::string("unavailable"))
              << "\n";
  }
  return 0;
}

}  // namespace

const CommandSet& full_commands() {
  static const CommandSet set{register_all, print_version};
  return set;
}

}  // namespace vt::cli
