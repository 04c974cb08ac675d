#include "training/zoo/zoo.h"

#include <algorithm>

#include "kernels/version.h"

namespace vt::training {
namespace {

std::vector<ModelInfo> make_zoo() {
  return {
      {"mlp",
       "multilayer perceptron on feature vectors (synthetic blobs or MNIST)",
       InputKind::kFeatures,
       "cross_entropy",
       {{"input_dim", 32, 1, 1 << 20, "features per example (784 for MNIST)"},
        {"hidden", 64, 1, 1 << 16, "units per hidden layer"},
        {"layers", 2, 0, 64, "hidden layers"},
        {"classes", 4, 2, 100000, "output classes"}}},
      {"cnn",
       "small ResNet with BatchNorm for 32x32x3 images (synthetic or CIFAR-10)",
       InputKind::kImages,
       "cross_entropy",
       {{"width", 16, 1, 1024, "channels of the first stage (doubled in the second)"},
        {"blocks", 1, 1, 64, "residual blocks per stage (two stages)"},
        {"classes", 10, 2, 100000, "output classes"}}},
      {"conv3d",
       "3D conv net 1->4->8->1 with ReLU, MSE against a target volume",
       InputKind::kVolumes,
       "mse",
       {{"size", 16, 4, 1024, "edge N of the N x N x N input volume"}}},
      {"gpt",
       "small decoder-only transformer on token sequences",
       InputKind::kTokens,
       "cross_entropy",
       {{"vocab", 64, 2, 1 << 20, "vocabulary size"},
        {"d_model", 64, 8, 1 << 15, "embedding width (a multiple of heads)"},
        {"layers", 2, 1, 256, "transformer blocks"},
        {"heads", 4, 1, 256, "attention heads"},
        {"seq_len", 32, 2, 1 << 16, "tokens per sequence"},
        {"mlp_ratio", 4, 1, 16, "MLP width as a multiple of d_model"},
        {"dropout_permille", 0, 0, 900, "dropout probability in 1/1000"}}},
      {"torchscript",
       "a user TorchScript module file: forward(x) -> output",
       InputKind::kFeatures,
       "cross_entropy",
       {}},
  };
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

const std::vector<ModelInfo>& zoo_models() {
  static const std::vector<ModelInfo> zoo = make_zoo();
  return zoo;
}

const ModelInfo* find_model(std::string_view name) {
  for (const ModelInfo& m : zoo_models()) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::vector<OptionSpec> synthetic_options(InputKind input) {
  switch (input) {
    case InputKind::kFeatures:
      return {{"samples", 512, 1, 1 << 24, "examples"},
              {"input_dim", 32, 1, 1 << 20, "features per example (torchscript models)"},
              {"classes", 4, 2, 100000, "classes (torchscript models)"}};
    case InputKind::kImages:
      return {{"samples", 256, 1, 1 << 22, "images"}};
    case InputKind::kVolumes:
      return {{"samples", 8, 1, 1 << 16, "volumes"}};
    case InputKind::kTokens:
      return {{"samples", 256, 1, 1 << 22, "sequences"}};
  }
  return {};
}

Result<Options> resolve_model_options(const ModelSpec& model) {
  const ModelInfo* info = find_model(model.name);
  if (info == nullptr) {
    return invalid_input("model.name: unknown model \"" + model.name +
                         "\" (expected mlp, cnn, conv3d, gpt or torchscript)");
  }
  return resolve(model.options, info->options, "model.options", model.name);
}

Result<std::vector<OptionSpec>> dataset_option_specs(const Task& task) {
  const ModelInfo* info = find_model(task.model.name);
  if (info == nullptr) return resolve_model_options(task.model).error();
  const std::string& ds = task.dataset.name;
  if (ds == "synthetic") return synthetic_options(info->input);
  if (ds == "mnist" || ds == "cifar10")
    return std::vector<OptionSpec>{{"limit", 0, 0, 1 << 24, "use the first N examples; 0 = all"}};
  if (ds == "tensors") return std::vector<OptionSpec>{};
  if (ds == "tokens") {
    return std::vector<OptionSpec>{
        {"context", 0, 0, 1 << 20, "tokens per example; 0 = the gpt's seq_len"},
        {"token_bits", 16, 16, 32, "16 (u16 files) or 32 (u32 files)"}};
  }
  return invalid_input("dataset.name: unknown dataset \"" + ds +
                       "\" (expected synthetic, mnist, cifar10, tensors or tokens)");
}

Result<Options> resolve_dataset_options(const Task& task) {
  VT_ASSIGN_OR_RETURN(std::vector<OptionSpec> specs, dataset_option_specs(task));
  const std::string& ds = task.dataset.name;
  const std::string what = ds == "synthetic" ? "synthetic data for " + task.model.name : ds;
  VT_ASSIGN_OR_RETURN(Options o, resolve(task.dataset.options, specs, "dataset.options", what));
  if (ds == "tokens") {
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
  return TrainingTask{task, std::move(model), std::move(dataset)};
}

Result<TrainingTask> resolve_for_training(const Task& task) {
  VT_ASSIGN_OR_RETURN(TrainingTask resolved, resolve_options(task));
  const Options& model = resolved.model;
  const std::string& m = task.model.name;
  const std::string& ds = task.dataset.name;
  if (m == "gpt" && model.at("d_model") % model.at("heads") != 0) {
    return invalid_input("model.options.d_model: " + std::to_string(model.at("d_model")) +
                         " is not a multiple of heads (" + std::to_string(model.at("heads")) + ")");
  }
  if (ds == "mnist" && !(m == "mlp" || m == "torchscript")) {
    return invalid_input(
        "dataset.name: mnist feeds 784-feature vectors; use model mlp or torchscript");
  }
  if (ds == "mnist" && m == "mlp" && (model.at("input_dim") != 784 || model.at("classes") != 10)) {
    return invalid_input("model.options: mnist needs input_dim 784 and classes 10");
  }
  if (ds == "cifar10" && !(m == "cnn" || m == "torchscript")) {
    return invalid_input(
        "dataset.name: cifar10 feeds 3x32x32 images; use model cnn or torchscript");
  }
  if (ds == "cifar10" && m == "cnn" && model.at("classes") != 10) {
    return invalid_input("model.options.classes: cifar10 has 10 classes");
  }
  if (task.loss == "model" && m != "torchscript") {
    return invalid_input(
        "loss: \"model\" takes the loss from a TorchScript module's forward(inputs, targets); "
        "model " +
        m + " has none");
  }
  const std::string expected_loss = m == "conv3d" ? "mse" : "cross_entropy";
  if (m != "torchscript" && task.loss != expected_loss) {
    return invalid_input("loss: model " + m + " trains with " + expected_loss + ", got " +
                         task.loss);
  }
  if (ds == "tokens" && !(m == "gpt" || m == "torchscript")) {
    return invalid_input("dataset.name: tokens feeds token windows; use model gpt or torchscript");
  }
  const bool has_eval = !task.dataset.eval_files.empty() || task.dataset.eval_fraction > 0.0;
  if (has_eval && !(ds == "tensors" || ds == "tokens")) {
    return invalid_input(
        "dataset: an eval split (eval_files, eval_fraction) needs dataset tensors or tokens, not " +
        ds);
  }
  if (ds == "tokens" && task.dataset.eval_fraction > 0.0) {
    return invalid_input(
        "dataset.eval_fraction: token files are cut into windows, not rows; pin held-out token "
        "files in eval_files");
  }
  const bool files = ds == "mnist" || ds == "cifar10" || ds == "tensors" || ds == "tokens";
  if (files && (task.dataset.path.empty() || task.dataset.files.empty())) {
    return invalid_input("dataset: " + ds + " needs a path and the SHA-256 of each file in files");
  }
  if (task.determinism == Determinism::kPortable) VT_RETURN_IF_ERROR(portable_reaches(task));
  return resolved;
}

OptimizerSpec default_optimizer(const std::string& model, const std::string& optimizer) {
  const std::string name = !optimizer.empty()  ? optimizer
                           : model == "conv3d" ? "adam"
                           : model == "gpt"    ? "adamw"
                                               : "sgd";
  OptimizerSpec o;
  o.name = name;
  if (name == "sgd") {
    o.lr = 0.05;
    o.momentum = 0.9;
    o.weight_decay = model == "cnn" ? 5e-4 : 0.0;
  } else {
    // Adam's step is about lr whatever the gradient's scale; sgd's 0.05 would be far too big.
    o.lr = model == "gpt" ? 3e-3 : 1e-3;
    o.weight_decay = name == "adamw" ? 0.01 : 0.0;
    if (model == "gpt") o.beta2 = 0.95;
  }
  return o;
}

ScheduleSpec default_schedule(const std::string& model, const std::string& name, double lr) {
  ScheduleSpec s;
  s.name = !name.empty() ? name : model == "gpt" ? "cosine" : "constant";
  if (model == "gpt") s.warmup_steps = 8;
  // min_lr may not exceed lr; 3e-4 is gpt's floor at its default rate of 3e-3.
  if (s.name == "cosine" && model == "gpt") s.min_lr = std::min(3e-4, lr);
  return s;
}

Result<Task> default_task(const std::string& model, const std::string& dataset) {
  Task task;
  task.model.name = model;
  task.dataset.name = dataset;
  const ModelInfo* info = find_model(model);
  if (info == nullptr) return resolve_model_options(task.model).error();
  task.loss = info->loss;
  task.optimizer = default_optimizer(model, "");
  task.schedule = default_schedule(model, "", task.optimizer.lr);
  if (model == "conv3d") task.batch_size = 4;
  if (model == "gpt") task.batch_size = 16;
  if (dataset == "mnist" && model == "mlp")
    task.model.options = {{"input_dim", 784}, {"classes", 10}};
  VT_ASSIGN_OR_RETURN(task.model.options, resolve_model_options(task.model));
  VT_ASSIGN_OR_RETURN(task.dataset.options, resolve_dataset_options(task));
  task.fingerprint.trail_interval = 4;
  return task;
}

}  // namespace vt::training
