#include "training/prepared_task.h"

namespace vt::training {

std::int64_t run_threads(const Task& task, const TrainerOptions& options) {
  return options.intra_op_threads > 0 ? options.intra_op_threads : task.intra_op_threads;
}

std::string run_device(const Task& task, const TrainerOptions& options) {
  return options.device.empty() ? name_string(task.device) : options.device;
}

Result<PreparedTask> prepare_task(const Task& task, const TrainerOptions& options) {
  PreparedTask p;
  VT_ASSIGN_OR_RETURN(p.resolved, resolve_for_training(task));
  p.id = task_id(task);
  p.threads = run_threads(task, options);
  p.device = run_device(task, options);
  return p;
}

}  // namespace vt::training
