#include "training/zoo/zoo.h"

#include <algorithm>

#include "kernels/version.h"

namespace vt::training {
namespace {

// "mlp, cnn, conv3d, gpt or torchscript": the names of a table's rows, for a refusal.
template <typename Row>
std::string names_of(const std::vector<Row>& rows) {
  std::string out;
  for (std::size_t i = 0; i < rows.size(); ++i)
    out += (i == 0 ? "" : i + 1 == rows.size() ? " or " : ", ") + rows[i].name;
  return out;
}

// The models that train on `dataset`, for a refusal: "mlp or torchscript".
std::string models_for(DatasetKind dataset) {
  std::vector<const ModelRow*> fit;
  for (const ModelRow& m : zoo_models()) {
    if (m.trains_on(dataset)) fit.push_back(&m);
  }
  std::string out;
  for (std::size_t i = 0; i < fit.size(); ++i)
    out += (i == 0 ? "" : i + 1 == fit.size() ? " or " : ", ") + fit[i]->name;
  return out;
}

Error unknown_model(const std::string& name) {
  return invalid_input("model.name: unknown model \"" + name + "\" (expected " +
                       names_of(zoo_models()) + ")");
}

std::string range_text(const OptionSpec& o) {
  return std::to_string(o.min) + ".." + std::to_string(o.max);
}

Error unknown_option(const std::string& path, const std::string& name, const std::string& owner,
                     const std::vector<OptionSpec>& specs) {
  std::string known;
  for (const OptionSpec& s : specs) {
    if (!known.empty()) known += ", ";
    known += s.name;
  }
  return invalid_input(path + "." + name + ": unknown option for " + owner +
                       (known.empty() ? " (it takes none)" : " (known: " + known + ")"));
}

Error out_of_range(const std::string& path, const OptionSpec& spec, std::int64_t value) {
  return invalid_input(path + "." + spec.name + ": expected " + range_text(spec) + ", got " +
                       std::to_string(value));
}

Result<Options> resolve(const Options& given, const std::vector<OptionSpec>& specs,
                        const std::string& path, const std::string& owner) {
  Options out;
  for (const auto& [name, value] : given) {
    auto it = std::ranges::find(specs, name, &OptionSpec::name);
    if (it == specs.end()) return unknown_option(path, name, owner, specs);
    if (value < it->min || value > it->max) return out_of_range(path, *it, value);
  }
  for (const OptionSpec& s : specs) {
    auto it = given.find(s.name);
    out[s.name] = it == given.end() ? s.default_value : it->second;
  }
  return out;
}

}  // namespace

Result<Options> resolve_model_options(const ModelSpec& model) {
  const ModelRow* row = find_model(model.name);
  if (row == nullptr) return unknown_model(model.name);
  return resolve(model.options, row->options, "model.options", model.name);
}

Result<std::vector<OptionSpec>> dataset_option_specs(const Task& task) {
  const ModelRow* model = find_model(task.model.name);
  if (model == nullptr) return unknown_model(task.model.name);
  const DatasetRow* dataset = find_dataset(task.dataset.name);
  if (dataset == nullptr) {
    return invalid_input("dataset.name: unknown dataset \"" + task.dataset.name + "\" (expected " +
                         names_of(zoo_datasets()) + ")");
  }
  if (dataset->kind == DatasetKind::kSynthetic) return synthetic_options(model->input);
  return dataset->options;
}

Result<Options> resolve_dataset_options(const Task& task) {
  VT_ASSIGN_OR_RETURN(std::vector<OptionSpec> specs, dataset_option_specs(task));
  const DatasetRow& dataset = *find_dataset(task.dataset.name);
  const std::string what = dataset.kind == DatasetKind::kSynthetic
                               ? "synthetic data for " + task.model.name
                               : dataset.name;
  VT_ASSIGN_OR_RETURN(Options o, resolve(task.dataset.options, specs, "dataset.options", what));
  if (dataset.kind == DatasetKind::kTokens) {
    if (o.at("token_bits") != 16 && o.at("token_bits") != 32) {
      return invalid_input("dataset.options.token_bits: expected 16 or 32, got " +
                           std::to_string(o.at("token_bits")));
    }
  }
  return o;
}

// Float32 on CPUs, today. A TorchScript module's operators are checked when it is loaded
// (script/rewrite.cpp).
Status portable_reaches(const Task& task) {
  if (task.device != Device::kCpu) {
    return invalid_input(
        "device: portable arithmetic runs on CPUs for now (its CUDA kernels are "
        "not written yet); use device cpu, or determinism exact on " +
        name_string(task.device));
  }
  if (task.precision != Precision::kFp32) {
    return invalid_input("precision: portable arithmetic is float32 throughout; use fp32, got " +
                         name_string(task.precision));
  }
  return {};
}

std::int64_t implemented_portable_arithmetic() { return kernels::kPortableArithmetic; }

Status implements_portable_arithmetic(const Task& task) {
  if (task.determinism != Determinism::kPortable ||
      task.portable_arithmetic == kernels::kPortableArithmetic)
    return {};
  return invalid_input("portable_arithmetic: this veritrain implements portable arithmetic " +
                       std::to_string(kernels::kPortableArithmetic) + ", the task asks for " +
                       std::to_string(task.portable_arithmetic) +
                       "; train it with a veritrain that implements that version");
}

Status validate_for_training(const Task& task) {
  Result<TrainingTask> resolved = resolve_for_training(task);
  if (!resolved.ok()) return resolved.error();
  return {};
}

Result<TrainingTask> resolve_options(const Task& task) {
  VT_ASSIGN_OR_RETURN(Options model, resolve_model_options(task.model));
  VT_ASSIGN_OR_RETURN(Options dataset, resolve_dataset_options(task));
  return TrainingTask{task, std::move(model), std::move(dataset), find_model(task.model.name),
                      find_dataset(task.dataset.name)};
}

namespace {

// A built-in dataset's fixed sizes against the model options they set.
Status check_fixed_sizes(const DatasetRow& dataset, const ModelRow& model, const Options& o) {
  const bool features = dataset.features > 0 && !model.feature_option.empty();
  const bool classes = dataset.classes > 0 && !model.class_option.empty();
  const bool features_wrong = features && o.at(model.feature_option) != dataset.features;
  const bool classes_wrong = classes && o.at(model.class_option) != dataset.classes;
  if (!features_wrong && !classes_wrong) return {};
  if (features) {
    return invalid_input("model.options: " + dataset.name + " needs " + model.feature_option + " " +
                         std::to_string(dataset.features) +
                         (classes
                              ? " and " + model.class_option + " " + std::to_string(dataset.classes)
                              : std::string()));
  }
  return invalid_input("model.options." + model.class_option + ": " + dataset.name + " has " +
                       std::to_string(dataset.classes) + " classes");
}

}  // namespace

Result<TrainingTask> resolve_for_training(const Task& task) {
  VT_ASSIGN_OR_RETURN(TrainingTask resolved, resolve_options(task));
  const ModelRow& model = resolved.zoo_model();
  const DatasetRow& dataset = resolved.zoo_dataset();
  if (model.check_options) {
    if (const std::string problem = model.check_options(resolved.model); !problem.empty())
      return invalid_input(problem);
  }
  if (!model.trains_on(dataset.kind)) {
    return invalid_input("dataset.name: " + dataset.name + " feeds " + dataset.feeds +
                         "; use model " + models_for(dataset.kind));
  }
  VT_RETURN_IF_ERROR(check_fixed_sizes(dataset, model, resolved.model));
  if (task.loss == "model" && !model.user_module) {
    return invalid_input(
        "loss: \"model\" takes the loss from a TorchScript module's forward(inputs, targets); "
        "model " +
        model.name + " has none");
  }
  if (!model.user_module && task.loss != model.loss) {
    return invalid_input("loss: model " + model.name + " trains with " + model.loss + ", got " +
                         task.loss);
  }
  const bool has_eval = !task.dataset.eval_files.empty() || task.dataset.eval_fraction > 0.0;
  if (has_eval && !dataset.memory_mapped) {
    std::string mapped;
    for (const DatasetRow& d : zoo_datasets()) {
      if (d.memory_mapped) mapped += (mapped.empty() ? "" : " or ") + d.name;
    }
    return invalid_input("dataset: an eval split (eval_files, eval_fraction) needs dataset " +
                         mapped + ", not " + dataset.name);
  }
  if (dataset.memory_mapped && !dataset.row_eval_split && task.dataset.eval_fraction > 0.0) {
    return invalid_input(
        "dataset.eval_fraction: token files are cut into windows, not rows; pin held-out token "
        "files in eval_files");
  }
  if (dataset.pinned_files && (task.dataset.path.empty() || task.dataset.files.empty())) {
    return invalid_input("dataset: " + dataset.name +
                         " needs a path and the SHA-256 of each file in files");
  }
  if (task.determinism == Determinism::kPortable) VT_RETURN_IF_ERROR(portable_reaches(task));
  return resolved;
}

OptimizerSpec default_optimizer(const ModelRow& model, const std::string& optimizer) {
  OptimizerSpec o;
  o.name = !optimizer.empty() ? optimizer : model.optimizer;
  if (o.name == "sgd") {
    o.lr = 0.05;
    o.momentum = 0.9;
    o.weight_decay = model.sgd_weight_decay;
  } else {
    // Adam's step is about lr whatever the gradient's scale; sgd's 0.05 would be far too big.
    o.lr = model.adam_lr;
    o.weight_decay = o.name == "adamw" ? 0.01 : 0.0;
    o.beta2 = model.adam_beta2;
  }
  return o;
}

ScheduleSpec default_schedule(const ModelRow& model, const std::string& name, double lr) {
  ScheduleSpec s;
  s.name = !name.empty() ? name : model.schedule;
  s.warmup_steps = model.warmup_steps;
  // min_lr may not exceed lr: the model's floor is for its default rate.
  if (s.name == "cosine" && model.cosine_min_lr > 0.0) s.min_lr = std::min(model.cosine_min_lr, lr);
  return s;
}

Result<Task> default_task(const std::string& model_name, const std::string& dataset_name) {
  Task task;
  task.model.name = model_name;
  task.dataset.name = dataset_name;
  const ModelRow* model = find_model(model_name);
  if (model == nullptr) return unknown_model(model_name);
  task.loss = model->loss;
  task.optimizer = default_optimizer(*model, "");
  task.schedule = default_schedule(*model, "", task.optimizer.lr);
  task.batch_size = model->batch_size;
  // A built-in dataset's fixed sizes are the model's from the start.
  if (const DatasetRow* dataset = find_dataset(dataset_name);
      dataset && model->trains_on(dataset->kind)) {
    if (dataset->features > 0 && !model->feature_option.empty())
      task.model.options[model->feature_option] = dataset->features;
    if (dataset->classes > 0 && !model->class_option.empty())
      task.model.options[model->class_option] = dataset->classes;
  }
  VT_ASSIGN_OR_RETURN(task.model.options, resolve_model_options(task.model));
  VT_ASSIGN_OR_RETURN(task.dataset.options, resolve_dataset_options(task));
  task.fingerprint.trail_interval = 4;
  return task;
}

}  // namespace vt::training
