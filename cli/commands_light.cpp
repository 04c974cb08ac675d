// The commands `veritrain` runs itself, without LibTorch, so that they start in milliseconds.
// The others are listed here for --help only: main_light.cpp hands them to `veritrain-torch`
// before any parsing (torch_forward.h).
#include <cstdlib>

#include "cli/app.h"
#include "cli/torch_forward.h"

namespace vt::cli {

void register_light_plan(CLI::App& app, Context& ctx);  // plan_light.cpp

namespace {

// A command that lives in veritrain-torch: a name and a line for the list in --help.
void listed(CLI::App& parent, const std::string& name, const std::string& description) {
  auto* cmd = parent.add_subcommand(name, description);
  cmd->allow_extras();
  cmd->callback([] { std::exit(exec_torch_program()); });
}

void register_light(CLI::App& app, Context& ctx) {
  register_keygen(app, ctx);
  auto* task =
      app.add_subcommand("task", "Write or show a task (what to train, how, for how long)");
  task->require_subcommand(1);
  listed(*task, "init", "Write a valid task with sensible defaults to stdout (or --out)");
  register_task_show(*task, ctx);
  listed(*task, "check",
         "Check a task before anyone pays: model against data, and a replay of a few steps");
  listed(app, "estimate", "Measure a task's state size and one step's peak memory and time");
  listed(app, "train", "Run a task as a provider: train, commit every epoch, store snapshots");
  register_log(app, ctx);
  register_serve(app, ctx);
  listed(app, "verify", "Challenge random epochs, replay them, and judge the provider");
  listed(app, "audit", "Replay a disputed epoch offline and write signed evidence");
  register_verdict(app, ctx);
  register_light_plan(app, ctx);
  listed(app, "export", "Write an epoch's trained model as TorchScript or safetensors");
  listed(app, "demo", "The whole flow on loopback: train, serve, verify online, report");
}

int version_from_torch(bool) { return exec_torch_program(); }

}  // namespace

const CommandSet& light_commands() {
  static const CommandSet set{register_light, version_from_torch};
  return set;
}

}  // namespace vt::cli
