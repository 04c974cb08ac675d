// `veritrain task show`: check a task and print it with its task_id. No LibTorch: the zoo's
// checks (training/zoo.h) are plain C++, so this runs in the light `veritrain` too.
#include <sstream>

#include "cli/app.h"
#include "protocol/task.h"
#include "training/zoo.h"

namespace vt::cli {

void register_task_show(CLI::App& task, Context& ctx) {
  auto path = std::make_shared<std::string>();
  auto* show = task.add_subcommand("show", "Check a task file and print it with its task_id");
  show->add_option("task", *path, "task.json")->required();
  show->callback([&ctx, path] {
    ctx.action = [&ctx, path]() -> Result<int> {
      VT_ASSIGN_OR_RETURN(Task t, load_task(*path));
      if (Status fit = training::validate_for_training(t); !fit) return fit.error().context(*path);
      const std::string id = hex_encode(task_id(t));
      std::ostringstream human;
      human << "task_id     " << id << "\n"
            << "model       " << t.model.name << "\n"
            << "dataset     " << t.dataset.name << "\n"
            << "optimizer   " << t.optimizer.name << " lr " << t.optimizer.lr << ", schedule " << t.schedule.name << "\n"
            << "epochs      " << t.epochs << " x " << (t.steps_per_epoch > 0 ? std::to_string(t.steps_per_epoch) : "full-pass")
            << " steps, batch " << t.batch_size << "\n"
            << "device      " << t.device << ", " << t.intra_op_threads << " intra-op threads, " << t.precision << ", "
            << t.determinism << " mode\n"
            << "fingerprint k=" << t.fingerprint.k << ", tracking k=" << t.fingerprint.tracking_k
            << ", trail every " << t.fingerprint.trail_interval << " steps\n";
      emit(ctx, {{"task_id", id}, {"task", nlohmann::json::parse(canonical_task_json(t))}}, human.str());
      return 0;
    };
  });
}

}  // namespace vt::cli
