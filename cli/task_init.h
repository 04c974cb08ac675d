#pragma once
// `veritrain task init`, registered by both executables. Writing a task means knowing the
// floating-point tensors of its training state (a fingerprint samples each: docs/fingerprint.md).
// veritrain-torch builds the model to learn them, for any model and data; the light `veritrain`
// counts a zoo model's on synthetic data without LibTorch (training::synthetic_zoo_state) and
// hands every other command line to veritrain-torch, so the common case starts in milliseconds.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/app.h"
#include "protocol/task.h"
#include "training/zoo/sizes.h"

namespace vt::cli {

using Environments = std::map<std::string, std::vector<std::string>>;

struct TaskInitHost {
  // Whether this program writes a task of these flags itself; null: it writes every task.
  // `needs_model`: a flag needs the model built (--pin-environment, --no-decay).
  bool (*writes)(const std::string& model, const std::string& dataset, bool needs_model);
  // Runs the command line in veritrain-torch (what writes() declines); its exit code. Null where
  // writes is.
  int (*hand_over)();
  // Every check training would make before its first step, and the state it would then hold.
  Result<training::StateCount> (*measure)(const Task& task);
  // The arithmetic environments this machine replays (training::replayable_environments), for
  // --pin-environment; null where writes() declines that flag.
  Environments (*replayable)(const Task& task, const std::filesystem::path& task_dir);
  // The parameters --no-decay's rule spares (training::resolve_no_decay over the built model);
  // null where writes() declines that flag.
  Result<std::vector<std::string>> (*no_decay)(const Task& task, const std::string& rule);
};

void register_task_init(CLI::App& task, Context& ctx, const TaskInitHost& host);

}  // namespace vt::cli
