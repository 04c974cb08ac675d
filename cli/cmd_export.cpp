// `veritrain export`: the trained model of one committed epoch, in the formats people load:
// the user's TorchScript module with those weights, and safetensors under the module's own
// names (docs/models.md).
#include <filesystem>
#include <sstream>

#include "cli/app.h"
#include "common/file_io.h"
#include "protocol/log.h"
#include "provider/workdir/store.h"
#include "provider/workdir/workdir.h"
#include "training/trainer.h"

namespace vt::cli {

void register_export(CLI::App& app, Context& ctx) {
  struct Args {
    std::string workdir, torchscript, safetensors, task_dir = ".", weights;
    std::uint64_t epoch = 0;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("export", summary_of("export"));
  cmd->add_option("--workdir", a->workdir, "The provider's workdir")->required();
  cmd->add_option("--epoch", a->epoch, "A committed epoch")->required();
  cmd->add_option("--torchscript", a->torchscript,
                  "Write the module (torchscript tasks) for torch.jit.load");
  cmd->add_option("--safetensors", a->safetensors,
                  "Write parameters and buffers under the module's own names");
  cmd->add_option("--weights", a->weights,
                  "average (the moving average of a task with optimizer.ema_decay, its default) "
                  "or trained (the weights the optimizer moved)")
      ->check(CLI::IsMember({"average", "trained"}));
  cmd->add_option("--task-dir", a->task_dir, "Where the task's relative paths (model.path) resolve")
      ->capture_default_str();
  cmd->callback([&ctx, a] {
    ctx.action = [&ctx, a]() -> Result<int> {
      if (a->torchscript.empty() && a->safetensors.empty()) {
        return invalid_input("export: give --torchscript FILE, --safetensors FILE or both");
      }
      VT_ASSIGN_OR_RETURN(provider::Workdir w, provider::Workdir::open_existing(a->workdir));
      VT_ASSIGN_OR_RETURN(LogFile log, read_log(w.log_file()));
      const SignedRecord* found = nullptr;
      for (const SignedRecord& r : log.records) {
        if (r.record.epoch == a->epoch) found = &r;
      }
      if (found == nullptr) {
        // Epoch 0 is the initial state, so N records are epochs 0..N-1.
        return invalid_input(
            "--epoch " + std::to_string(a->epoch) + ": not committed in " + a->workdir +
            (log.records.empty() ? std::string(" (nothing is committed yet)")
                                 : " (it commits epochs 0.." +
                                       std::to_string(log.records.back().record.epoch) + ")"));
      }
      provider::SnapshotStore store(w.snapshots_dir(), {1, 0, 64});
      VT_ASSIGN_OR_RETURN(Bytes snapshot, store.load_canonical(found->record.root));
      training::TrainerOptions o;
      o.task_dir = a->task_dir;
      o.device = "cpu";              // the exported tensors are CPU tensors wherever training ran
      o.restore_for_replay = false;  // an exact task's GPU state exports on a CPU too
      VT_ASSIGN_OR_RETURN(auto trainer, training::Trainer::restore(w.task(), snapshot, o));
      if (a->weights == "average" && !trainer->averages_weights()) {
        return invalid_input(
            "--weights average: the task keeps no moving average of its weights "
            "(optimizer.ema_decay is not set)");
      }
      const bool averaged = trainer->averages_weights() && a->weights != "trained";
      const std::string which = averaged ? "average" : "trained";
      nlohmann::json j = {
          {"epoch", a->epoch}, {"root", hex_encode(found->record.root)}, {"weights", which}};
      std::ostringstream human;
      if (!a->torchscript.empty()) {
        VT_RETURN_IF_ERROR(trainer->export_torchscript(a->torchscript, averaged));
        j["torchscript"] = a->torchscript;
        human << "wrote " << a->torchscript << " (TorchScript, epoch " << a->epoch << ", " << which
              << " weights)\n";
      }
      if (!a->safetensors.empty()) {
        VT_ASSIGN_OR_RETURN(Bytes bytes, trainer->export_safetensors(averaged));
        VT_RETURN_IF_ERROR(write_file_atomic(a->safetensors, bytes));
        j["safetensors"] = a->safetensors;
        human << "wrote " << a->safetensors << " (safetensors, epoch " << a->epoch << ", " << which
              << " weights)\n";
      }
      emit(ctx, j, human.str());
      return 0;
    };
  });
}

}  // namespace vt::cli
