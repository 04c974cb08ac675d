#pragma once
// The model zoo and the datasets as two tables, described without LibTorch: a row per model and
// a row per dataset holds every fact the rest of veritrain asks of it (its options with their
// defaults and ranges, what it trains with and on, its defaults, its size as arithmetic), so a
// caller asks the row and never compares a name. A name is read once, where a task is resolved
// (find_model, find_dataset: the rows of a TrainingTask). `task init` writes tasks from here;
// validate_for_training checks a task against it before any tensor exists. The module each model
// row builds is training/model/models.h's, indexed by the row's ModelKind.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
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

// What one example of a model's input is; synthetic data is made to it.
enum class InputKind { kFeatures, kImages, kVolumes, kTokens };

// Indexes the model table: zoo_models()[static_cast<std::size_t>(kind)] is its row.
enum class ModelKind { kMlp, kCnn, kConv3d, kGpt, kTorchScript };
inline constexpr std::size_t kModelKinds = 5;
enum class DatasetKind { kSynthetic, kMnist, kCifar10, kTensors, kTokens };
inline constexpr std::size_t kDatasetKinds = 5;

// A model's training state as Trainer::layout() lists its floating-point tensors: parameters,
// and statistics (BatchNorm's running mean and variance) that the optimizer does not update.
struct ModelTensors {
  std::uint64_t parameter_tensors = 0;
  std::uint64_t statistic_tensors = 0;
  std::uint64_t statistic_elements = 0;
};

struct ModelRow {
  ModelKind kind;
  std::string name;
  std::string description;
  InputKind input;
  // The loss it trains with; a TorchScript module may take any (its synthetic data is made for
  // cross_entropy) and "model", its own.
  std::string loss;
  std::vector<OptionSpec> options;
  // The datasets it trains on besides synthetic data.
  std::vector<DatasetKind> datasets;
  // A requestor's own module (model.path, pinned by SHA-256), not one veritrain builds: its sizes
  // are its file's, and its synthetic data takes its sizes from the dataset's options.
  bool user_module = false;
  // The option a dataset's number of classes (or a tokens file's vocabulary) sets, and the one its
  // features per example set; "" when none does.
  std::string class_option;
  std::string feature_option;
  // Its honest cross-thread-count spread is a convolution's (docs/tolerance.md), not a product's.
  bool convolutional = false;
  // Defaults a task init writes for it.
  std::int64_t batch_size = 32;
  std::string optimizer = "sgd";
  double sgd_weight_decay = 0.0;
  double adam_lr = 1e-3;
  double adam_beta2 = 0.999;
  std::string schedule = "constant";
  std::int64_t warmup_steps = 0;
  double cosine_min_lr = 0.0;  // at most the task's lr
  // Size as arithmetic over its resolved options (none for a user module): parameters, floats a
  // forward pass keeps per example until backward, and its state's tensors. Each matches the
  // module training/model/models.cpp builds; tests/training/sizes_trainer_test.cpp holds them to
  // it.
  std::uint64_t (*parameters)(const Options&) = nullptr;
  std::uint64_t (*activation_floats)(const Options&) = nullptr;
  ModelTensors (*tensors)(const Options&) = nullptr;
  // What its resolved options must satisfy beyond their ranges ("" when they do).
  std::string (*check_options)(const Options&) = nullptr;

  bool trains_on(DatasetKind dataset) const;
};

struct DatasetRow {
  DatasetKind kind;
  std::string name;
  std::string description;
  // What it feeds a model, said in its refusals ("784-feature vectors"); "" for data of any shape.
  std::string feeds;
  InputKind input = InputKind::kFeatures;  // meaningful when `feeds` is set
  // A built-in dataset's fixed sizes: the number of classes, and features per example (0: not
  // fixed). A model it feeds takes them (ModelRow::class_option, feature_option).
  std::int64_t classes = 0;
  std::int64_t features = 0;
  bool pinned_files = false;        // read from files in dataset.path, each pinned by SHA-256
  bool memory_mapped = false;       // read through memory maps, never whole (docs/datasets.md)
  bool row_eval_split = false;      // eval_fraction may hold rows out
  std::string train_file_prefix;    // task init pins the files of its folder that start so
  std::vector<OptionSpec> options;  // synthetic data's depend on the model: synthetic_options
};

const std::vector<ModelRow>& zoo_models();
const ModelRow& model_row(ModelKind kind);
// The parse edge: a model's or a dataset's row by name; nullptr for an unknown name.
const ModelRow* find_model(std::string_view name);
const std::vector<DatasetRow>& zoo_datasets();
const DatasetRow& dataset_row(DatasetKind kind);
const DatasetRow* find_dataset(std::string_view name);
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
  const ModelRow* model_row = nullptr;
  const DatasetRow* dataset_row = nullptr;
  const ModelRow& zoo_model() const { return *model_row; }
  const DatasetRow& zoo_dataset() const { return *dataset_row; }
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
OptimizerSpec default_optimizer(const ModelRow& model, const std::string& optimizer);
// The schedule `name` ("" = the model's own choice) for `model` at base rate `lr`.
ScheduleSpec default_schedule(const ModelRow& model, const std::string& name, double lr);

}  // namespace vt::training
