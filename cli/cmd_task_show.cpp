// `veritrain task show`: check a task and print it with its task_id. No LibTorch: the zoo's
// checks (training/zoo/zoo.h) are plain C++, so this runs in the light `veritrain` too.
#include "cli/app.h"
#include "cli/task_fields.h"
#include "protocol/task.h"
#include "training/zoo/zoo.h"

namespace vt::cli {

void register_task_show(CLI::App& task, Context& ctx) {
  auto path = std::make_shared<std::string>();
  auto* show = task.add_subcommand("show", summary_of("task show"));
  show->add_option("task", *path, "task.json")->required();
  show->callback([&ctx, path] {
    ctx.action = [&ctx, path]() -> Result<int> {
      VT_ASSIGN_OR_RETURN(Task t, load_task(*path));
      if (Status fit = training::validate_for_training(t); !fit) return fit.error().context(*path);
      const std::string id = hex_encode(task_id(t));
      const std::string human = "task_id " + id + "\n" + describe_task(t);
      emit(ctx, {{"task_id", id}, {"task", nlohmann::json::parse(canonical_task_json(t))}}, human);
      return 0;
    };
  });
}

}  // namespace vt::cli
