// `veritrain estimate`: parameters, state bytes and the measured memory and time of one step.
#include <cstdio>
#include <filesystem>

#include "cli/app.h"
#include "common/text.h"
#include "protocol/task.h"
#include "provider/provider.h"
#include "training/estimate.h"
#include "verifier/policy/cost_plan.h"

namespace vt::cli {
namespace {

std::string size_of(std::uint64_t bytes) { return size_text(static_cast<double>(bytes)); }

nlohmann::json parts_json(const training::PeakPrediction& p) {
  nlohmann::json parts = nlohmann::json::array();
  for (const training::PeakPart& part : p.parts)
    parts.push_back({{"name", part.name}, {"bytes", part.bytes}});
  return parts;
}

std::string parts_text(const training::PeakPrediction& p) {
  std::string out;
  for (const training::PeakPart& part : p.parts)
    out += "  " + size_of(part.bytes) + "  " + part.name + "\n";
  return out;
}

}  // namespace

void register_estimate(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("estimate", summary_of("estimate"));
  auto task_path = std::make_shared<std::string>();
  auto device = std::make_shared<std::string>();
  auto checkpoint = std::make_shared<bool>(false);
  cmd->add_option("--task", *task_path, "task.json")->required();
  cmd->add_option("--device", *device,
                  "Measure on cpu, cuda or cuda:N instead of the task's device");
  cmd->add_flag("--checkpoint-activations", *checkpoint,
                "Measure with each block's activations recomputed in the backward pass (as "
                "train --checkpoint-activations)");
  cmd->callback([&ctx, task_path, device, checkpoint] {
    ctx.action = [&ctx, task_path, device, checkpoint]() -> Result<int> {
      VT_ASSIGN_OR_RETURN(Task task, load_task(*task_path));
      training::TrainerOptions options;
      options.task_dir = std::filesystem::path(*task_path).parent_path();
      options.device = *device;
      options.checkpoint_activations = *checkpoint;
      VT_ASSIGN_OR_RETURN(training::MemoryEstimate e, training::estimate(task, options));
      // The plan's model of bytes (verifier/policy/cost_plan.h), before compression: a bit-for-bit
      // check fetches the state the epoch starts from; tolerance mode the one after it too.
      const std::uint64_t states = replays_bit_for_bit(task) ? 1 : 2;
      const std::uint64_t per_check = states * e.snapshot_bytes;
      // `train`'s peak: a step's, plus its commitments' buffers in the mode auto picks.
      const bool streamed = provider::auto_streams(e.snapshot_bytes, e.device);
      const training::PeakPrediction train_peak = training::training_peak(
          e, {{std::string("commitments (") + (streamed ? "streamed" : "overlapped") + ")",
               provider::commitment_buffer_bytes(e.snapshot_bytes, streamed)}});
      const training::PeakPrediction replay_peak =
          verifier::replay_peak(e, replays_bit_for_bit(task));
      nlohmann::json j = {
          {"parameters", e.parameters},
          {"parameter_bytes", e.parameter_bytes},
          {"optimizer_state_bytes", e.optimizer_state_bytes},
          {"snapshot_bytes", e.snapshot_bytes},
          {"step_peak_bytes", e.step_peak_bytes},
          {"peak_source", e.peak_source},
          {"gradient_groups", e.gradient_groups},
          {"examples_per_group", e.examples_per_group},
          {"step_seconds", e.step_seconds},
          {"steps_per_epoch", e.steps_per_epoch},
          {"epoch_seconds_estimate", e.step_seconds * static_cast<double>(e.steps_per_epoch)},
          {"raw_bytes_per_check", per_check},
          {"process_bytes", e.process_bytes},
          {"resting_bytes", e.resting_bytes},
          {"train_commit_mode", streamed ? "stream" : "overlap"},
          {"train_peak_bytes", train_peak.total()},
          {"train_peak_parts", parts_json(train_peak)},
          {"replay_peak_bytes", replay_peak.total()},
          {"replay_peak_parts", parts_json(replay_peak)},
          {"device", e.device}};
      char secs[64];
      std::snprintf(secs, sizeof secs, "%.4f s/step, ~%.2f s/epoch", e.step_seconds,
                    e.step_seconds * static_cast<double>(e.steps_per_epoch));
      std::string human =
          "parameters        " + std::to_string(e.parameters) + " (" + size_of(e.parameter_bytes) +
          ")\n" + "optimizer state   " + size_of(e.optimizer_state_bytes) + "\n" +
          "snapshot (raw)    " + size_of(e.snapshot_bytes) + "; a check fetches " +
          (states == 1 ? std::string("the state before its epoch")
                       : std::string("the states before and after its epoch")) +
          ", " + size_of(per_check) +
          " before compression (veritrain plan: compressed, and in total)\n" +
          "step peak memory  " + size_of(e.step_peak_bytes) + " above the resting state (" +
          e.peak_source + ")\n" + "  per group       " + std::to_string(e.gradient_groups) +
          " group(s) of " + std::to_string(e.examples_per_group) +
          " examples, run one at a time: the peak is one group's\n" + "step time         " + secs +
          " on " + e.device + "\n" + "train peak        " + size_of(train_peak.total()) +
          " resident, predicted:\n" + parts_text(train_peak) + "replay peak       " +
          size_of(replay_peak.total()) + " resident, predicted (verify, one replay):\n" +
          parts_text(replay_peak);
      emit(ctx, j, human);
      return 0;
    };
  });
}

}  // namespace vt::cli
