#pragma once
// The model zoo and the datasets, described without LibTorch: which options each accepts,
// their defaults and ranges, and which pairs fit together. `task init` writes tasks from here;
// validate_for_training checks a task against it before any tensor exists.

#include <string>
#include <vector>

#include "protocol/task.h"

namespace vt::training {

struct OptionSpec {
  std::string name;
  std::int64_t default_value;
  std::int64_t min;
  std::int64_t max;
  std::string help;
};

enum class InputKind { kFeatures, kImages, kVolumes, kTokens };

struct ModelInfo {
  std::string name;
  std::string description;
  InputKind input;
  std::string loss;  // the loss its synthetic data is made for
  std::vector<OptionSpec> options;
};

struct DatasetInfo {
  std::string name;
  std::string description;
  std::vector<OptionSpec> options;
};

const std::vector<ModelInfo>& zoo_models();
const ModelInfo* find_model(std::string_view name);
std::vector<OptionSpec> synthetic_options(InputKind input);

// Model and dataset options with every default filled in; unknown names and out-of-range
// values rejected with their path ("model.options.width: expected 1..512, got 0").
Result<Options> resolve_model_options(const ModelSpec& model);
Result<Options> resolve_dataset_options(const Task& task);
// The options the task's dataset takes, for its model (synthetic data depends on it).
Result<std::vector<OptionSpec>> dataset_option_specs(const Task& task);

// A task checked for training, its model's and dataset's options with every default filled in:
// worked out once, where a run starts, and read by the data, size and model code after it.
struct TrainingTask {
  Task task;
  Options model;    // model.options, resolved (resolve_model_options)
  Options dataset;  // dataset.options, resolved (resolve_dataset_options)
};

// The task's options resolved, nothing else checked: for a task still being written (task init
// reads a dataset's files before the model's options are complete).
Result<TrainingTask> resolve_options(const Task& task);
// Everything a task must satisfy before training can start: options, model/dataset/loss fit,
// and a device this build can use.
Result<TrainingTask> resolve_for_training(const Task& task);
Status validate_for_training(const Task& task);

// Whether portable arithmetic reaches the task's device and precision (docs/portable.md,
// "Scope"), whatever its determinism: what a portable task must pass, and so what decides the
// determinism task init and the demo choose when none is asked for.
Status portable_reaches(const Task& task);
// The edition of portable arithmetic this build implements (docs/portable.md, "Versions"): what
// task init commits as portable_arithmetic, and the only one train runs or verify replays.
std::int64_t implemented_portable_arithmetic();
// An error naming both versions when a portable task asks for another edition: what train and
// task check refuse. A verifier says inconclusive instead (training::match_environment); its
// Trainer for such a task only lays out the tensors, and replays nothing.
Status implements_portable_arithmetic(const Task& task);

// A valid task for `model` on `dataset` with sensible defaults, as `task init` writes it.
Result<Task> default_task(const std::string& model, const std::string& dataset);

// Hyperparameters that suit `optimizer` ("" = the model's own choice) for `model`: every field
// an optimizer does not use keeps its neutral default, so any pair validates.
OptimizerSpec default_optimizer(const std::string& model, const std::string& optimizer);
// The schedule `name` ("" = the model's own choice) for `model` at base rate `lr`.
ScheduleSpec default_schedule(const std::string& model, const std::string& name, double lr);

}  // namespace vt::training
