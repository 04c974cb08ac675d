#pragma once
// A task: what to train, how, and for how long (docs/task.md). task_id is the SHA-256 of its
// canonical JSON, so any change to any field - one hyperparameter - is another task.
//
// Model and dataset options are open maps of integers: which names each zoo model or dataset
// accepts is known to training/ (training::validate_for_training), not here.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"

namespace vt {

using Options = std::map<std::string, std::int64_t>;

// How a replay must agree with the provider (docs/task.md, `determinism`): portable is
// veritrain's own arithmetic, the same bits on any CPU; exact is LibTorch's kernels, bit for bit
// in the committed environment; tolerance is LibTorch's kernels within calibrated thresholds.
enum class Determinism { kExact, kPortable, kTolerance };
enum class Device { kCpu, kCuda };
enum class Precision { kFp32, kTf32, kBf16 };

// How the task file, the command line and a snapshot's metadata spell each value, in the
// enumeration's order: the one table both directions read.
template <class Enum>
struct EnumNames;
template <>
struct EnumNames<Determinism> {
  static constexpr std::array<std::string_view, 3> names{"exact", "portable", "tolerance"};
};
template <>
struct EnumNames<Device> {
  static constexpr std::array<std::string_view, 2> names{"cpu", "cuda"};
};
template <>
struct EnumNames<Precision> {
  static constexpr std::array<std::string_view, 3> names{"fp32", "tf32", "bf16"};
};

template <class Enum>
constexpr std::string_view name_of(Enum value) {
  return EnumNames<Enum>::names[static_cast<std::size_t>(value)];
}
template <class Enum>
std::string name_string(Enum value) {
  return std::string(name_of(value));
}
// The value spelt `name`, or nullopt for a name no value has.
template <class Enum>
constexpr std::optional<Enum> enum_named(std::string_view name) {
  const auto& names = EnumNames<Enum>::names;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  return std::nullopt;
}
// "\"exact\", \"portable\", \"tolerance\"": what an error about a wrong name lists.
template <class Enum>
std::string quoted_names() {
  std::string list;
  for (std::string_view n : EnumNames<Enum>::names) {
    list += (list.empty() ? "\"" : ", \"") + std::string(n) + "\"";
  }
  return list;
}

// The model name of a requestor's own TorchScript module: the one model the format itself knows,
// because it alone comes with a file (path, sha256). Every other name is a row of training/'s zoo.
inline constexpr std::string_view kTorchScriptModel = "torchscript";

struct ModelSpec {
  std::string name;    // "mlp" | "cnn" | "conv3d" | "gpt" | "torchscript"
  Options options;     // e.g. {"width": 16} — per model, checked by training/
  std::string path;    // torchscript only: module file, relative to the task file
  std::string sha256;  // torchscript only: hex digest of that file
  bool torchscript() const { return name == kTorchScriptModel; }
};

// Image augmentation of the training examples (docs/datasets.md, "Augmentation"): torchvision's
// RandomCrop(size = the image's own, padding = crop_padding, padding_mode) then
// RandomHorizontalFlip(0.5), drawn per example from the task's PRNG. Held-out data is never
// augmented. Written in the canonical form only when it does something.
struct AugmentSpec {
  std::int64_t crop_padding = 0;
  std::string padding_mode = "zero";  // "zero" (0.0 in what the model receives) | "reflect"
  bool flip = false;
  bool any() const { return crop_padding > 0 || flip; }
  bool operator==(const AugmentSpec&) const = default;
};

struct DatasetSpec {
  std::string name;                          // "synthetic" | "mnist" | "cifar10"
  Options options;                           // e.g. {"samples": 512}
  std::string path;                          // mnist / cifar10: folder holding the files
  std::map<std::string, std::string> files;  // file name -> hex SHA-256, pinned
  // Held-out split (tensors, tokens): its own pinned files in `path`, or a fraction of the
  // examples chosen by the task's PRNG. Written in the canonical form only when set, so tasks
  // from before these fields keep their task_id (docs/task.md).
  std::map<std::string, std::string> eval_files;
  double eval_fraction = 0.0;
  AugmentSpec augment;
};

struct OptimizerSpec {
  std::string name = "sgd";  // "sgd" | "adam" | "adamw"
  double lr = 0.01;
  double momentum = 0.0;  // sgd
  bool nesterov = false;  // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9;  // adam, adamw
  double beta2 = 0.999;
  double eps = 1e-8;
  // Recipes (docs/training.md, "Recipes"), each written in the canonical form only when set, so
  // that every task written before them keeps its task_id. clip_grad_norm > 0: before each
  // update the gradients are scaled so that their global norm (clip_norm "l2" or "inf", over
  // every parameter's gradient) is at most it, as torch.nn.utils.clip_grad_norm_ does.
  double clip_grad_norm = 0.0;
  std::string clip_norm = "l2";
  // Parameters whose update skips weight decay (biases and norm weights, in most recipes): the
  // names task init resolved from the model, so that no verifier can disagree about which.
  std::vector<std::string> no_decay = {};
  // > 0: an exponential moving average of the model's floating-point parameters and buffers,
  // a ← a·d + x·(1 − d) after every update, starting from the initial weights (timm's ModelEmaV2,
  // torchvision's ExponentialMovingAverage); held-out metrics and `export` use it.
  double ema_decay = 0.0;
};

// The built-in loss's options (a TorchScript module's own loss has its own).
struct LossOptions {
  double label_smoothing = 0.0;  // cross_entropy: PyTorch's label_smoothing, in [0, 1)
};

struct ScheduleSpec {
  std::string name = "constant";  // "constant" | "step" | "cosine"
  std::int64_t step_size = 1;     // step: epochs between decays
  double gamma = 0.1;             // step: decay factor
  double min_lr = 0.0;            // cosine: final learning rate
  std::int64_t warmup_steps = 0;  // linear warmup from 0 over this many steps, any schedule
};

struct FingerprintSpec {
  std::int64_t k = 1024;            // values sampled per commitment
  std::int64_t tracking_k = 256;    // values in the tracking fingerprint
  std::int64_t trail_interval = 0;  // steps between intra-epoch trail fingerprints; 0 = none
};

struct ToleranceSpec {
  double atol = 0.0;
  double rtol = 0.0;
  double rel_l2 = 0.0;  // aggregate relative L2 bound
  double max_outlier_fraction = 0.0;
};

struct Task {
  std::int64_t version = 1;
  ModelSpec model;
  DatasetSpec dataset;
  std::string loss = "cross_entropy";  // "cross_entropy" | "mse"
  LossOptions loss_options;            // in the canonical form only when set
  OptimizerSpec optimizer;
  ScheduleSpec schedule;
  std::int64_t epochs = 3;
  std::int64_t steps_per_epoch = 0;  // 0 = one full pass over the dataset
  std::int64_t batch_size = 32;
  // Data-parallel training (docs/training.md, "Gradient groups"). gradient_groups changes what
  // is computed and enters the task_id when it is not 1; world_size only says how many ranks
  // `train` starts by default and never enters the task_id, so a run on any number of ranks
  // and its one-process replay share one task_id and one set of roots.
  std::int64_t gradient_groups = 1;  // a power of two dividing batch_size
  std::int64_t world_size = 1;       // a power of two <= gradient_groups
  std::uint64_t seed = 0;
  std::int64_t intra_op_threads = 1;
  Device device = Device::kCpu;
  Determinism determinism = Determinism::kExact;
  // Which edition of docs/portable.md's arithmetic a portable task is trained in: any change that
  // moves a portable bit is a new version, so a workdir trained before it still names the
  // arithmetic that reproduces it. Meaningful for determinism "portable" only; absent from the
  // canonical form at 1, so every portable task written before versions existed keeps its id.
  std::int64_t portable_arithmetic = 1;
  Precision precision = Precision::kFp32;
  FingerprintSpec fingerprint;
  ToleranceSpec tolerance;
  // The arithmetic environments the requestor accepts (docs/environment.md): field -> the
  // values a provider may commit. Empty: any. Written in the canonical form only when set.
  std::map<std::string, std::vector<std::string>> environments;
};

// Parses task JSON. Unknown or missing fields and wrong types are rejected with the field's
// path and what was expected: "task.json: optimizer.lr: expected a number > 0, got -1".
// Required: model.name, dataset.name, epochs, batch_size; every other field has the default
// above (docs/task.md). parse_task runs validate_task on what it read.
Result<Task> parse_task(std::string_view json_text, std::string_view where = "task");
Result<Task> load_task(const std::string& path);

// Checks ranges, enumerations, digests and fields that only make sense together, for a task
// parsed from JSON or built in code (`task init`); errors read like parse_task's.
Status validate_task(const Task& task, std::string_view where = "task");

// Whether a replay must reproduce the committed bits (portable and exact), rather than come
// within the task's tolerance.
inline bool replays_bit_for_bit(const Task& task) {
  return task.determinism != Determinism::kTolerance;
}

std::string canonical_task_json(const Task& task);  // sorted keys, no whitespace
std::string pretty_task_json(
    const Task& task);             // the same fields and world_size, indented; no final newline
Digest task_id(const Task& task);  // SHA-256 of canonical_task_json

}  // namespace vt
