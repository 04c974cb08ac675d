// The commands `veritrain` runs itself, without LibTorch, so that they start in milliseconds.
// The others are listed here for --help only: veritrain_main.cpp hands them to `veritrain-torch`
// before any parsing (torch_forward.h).
#include <cstdlib>

#include "cli/app.h"
#include "cli/task_init.h"
#include "cli/torch_forward.h"

namespace vt::cli {

void register_light_plan(CLI::App& app, Context& ctx);  // plan_light.cpp

namespace {

// task init without LibTorch: the zoo's models on the synthetic data made for them, and the
// refusal of a model name the zoo does not have (it needs no LibTorch to say so).
bool writes_zoo_on_synthetic(const std::string& model, const std::string& dataset,
                             bool needs_model) {
  const bool unknown = training::find_model(model) == nullptr;
  return (unknown || training::counted_without_building(model, dataset)) && !needs_model;
}
constexpr TaskInitHost kLightTaskInit{writes_zoo_on_synthetic, exec_torch_program,
                                      training::synthetic_zoo_state, nullptr, nullptr};

// A command that lives in veritrain-torch: listed for --help with its summary, handed over when
// run.
void listed(CLI::App& parent, const std::string& name, const std::string& path) {
  auto* cmd = parent.add_subcommand(name, summary_of(path));
  cmd->allow_extras();
  cmd->callback([] { std::exit(exec_torch_program()); });
}

// Registration follows command_table(): its light commands here, the others listed.
void register_light(CLI::App& app, Context& ctx) {
  register_keygen(app, ctx);
  auto* task = app.add_subcommand("task", summary_of("task"));
  task->require_subcommand(1);
  register_task_init(*task, ctx, kLightTaskInit);
  register_task_show(*task, ctx);
  listed(*task, "check", "task check");
  listed(app, "estimate", "estimate");
  listed(app, "train", "train");
  register_log(app, ctx);
  register_inspect(app, ctx);
  register_serve(app, ctx);
  listed(app, "verify", "verify");
  listed(app, "audit", "audit");
  listed(app, "trace", "trace");
  listed(app, "dispute", "dispute");
  register_referee(app, ctx);
  register_verdict(app, ctx);
  register_light_plan(app, ctx);
  listed(app, "export", "export");
  listed(app, "demo", "demo");
}

int version_from_torch(bool) { return exec_torch_program(); }

}  // namespace

const CommandSet& light_commands() {
  static const CommandSet set{register_light, version_from_torch};
  return set;
}

}  // namespace vt::cli
