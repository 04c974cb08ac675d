// `veritrain task init`: the requestor writes a task (cli/task_init.h says which executable runs
// it when).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/suggest.h"
#include "cli/task_data.h"
#include "cli/task_fields.h"
#include "cli/task_init.h"
#include "common/file_io.h"
#include "common/sha256.h"
#include "protocol/environment.h"
#include "training/zoo/zoo.h"

namespace vt::cli {
namespace {
namespace fs = std::filesystem;

struct InitArgs {
  std::string model = "cnn", dataset = "synthetic", out;
  std::int64_t epochs = 0, steps = -1, batch = 0, threads = 0, k = 0, trail = -1;
  std::int64_t groups = 0, world = 0;  // gradient_groups, world_size (docs/task.md)
  std::string seed, device, precision, determinism, optimizer, schedule, data_dir, model_file;
  double lr = 0;
  bool pin_environment = false, list_options = false;
  std::vector<std::string> model_options, data_options;
  DataFlags data;  // --data-file, --eval-file, ... (cli/task_data.h)
  HyperArgs hyper;
};

// "key=value" pairs into an options map; `what` names the flag in errors.
Status parse_options(const std::vector<std::string>& pairs, Options& into,
                     const std::string& what) {
  for (const std::string& p : pairs) {
    auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::string message = what;
      message += ": expected key=value, got \"" + p + "\"";
      return invalid_input(message);
    }
    const std::optional<std::int64_t> v =
        parse_integer<std::int64_t>(std::string_view(p).substr(eq + 1));
    if (!v) return invalid_input(what + ": value of \"" + p.substr(0, eq) + "\" is not an integer");
    into[p.substr(0, eq)] = *v;
  }
  return {};
}

// `task init --model M [--dataset D] --list-options`: what --option and --data-option take.
Result<int> list_options(Context& ctx, const InitArgs& a) {
  const training::ModelRow* model = training::find_model(a.model);
  if (model == nullptr) return invalid_input("--model: no model named \"" + a.model + "\"");
  Task task;
  task.model.name = a.model;
  task.dataset.name = a.dataset;
  VT_ASSIGN_OR_RETURN(std::vector<training::OptionSpec> data_specs,
                      training::dataset_option_specs(task));
  nlohmann::json j = {{"model", a.model}, {"dataset", a.dataset}};
  std::ostringstream text;
  const auto table = [&](const char* flag, const std::vector<training::OptionSpec>& specs,
                         const char* key) {
    j[key] = nlohmann::json::array();
    text << flag << " NAME=VALUE:\n";
    if (specs.empty()) text << "  (none)\n";
    for (const training::OptionSpec& o : specs) {
      j[key].push_back({{"name", o.name},
                        {"default", o.default_value},
                        {"min", o.min},
                        {"max", o.max},
                        {"help", o.help}});
      text << "  " << o.name << "  default " << o.default_value << ", " << o.min << ".." << o.max
           << "  " << o.help << "\n";
    }
  };
  text << a.model << ": " << model->description << "\n";
  table("--option", model->options, "model_options");
  text << "dataset " << a.dataset << "\n";
  table("--data-option", data_specs, "dataset_options");
  text
      << "(tensors and tokens data: task init fills input_dim, classes and vocab from the files)\n";
  emit(ctx, j, text.str());
  return 0;
}

// Pins every regular file in `dir` by SHA-256 (MNIST idx or CIFAR-10 batches).
Status pin_data_files(Task& task, const std::string& dir) {
  const training::DatasetRow* found = training::find_dataset(task.dataset.name);
  if (found == nullptr) return training::resolve_dataset_options(task).error();
  const training::DatasetRow& dataset = *found;
  task.dataset.path = dir;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    if (name.rfind(dataset.train_file_prefix, 0) != 0) continue;
    VT_ASSIGN_OR_RETURN(Bytes bytes, read_file(entry.path()));
    task.dataset.files[name] = hex_encode(sha256(bytes));
  }
  if (ec) return io_error("reading folder " + dir + ": " + ec.message());
  if (task.dataset.files.empty())
    return invalid_input("--data-dir " + dir + ": no " + task.dataset.name + " files found");
  return {};
}

// A fingerprint samples every floating-point tensor at least once (docs/fingerprint.md), so k
// must be at least their count; a deep model has hundreds. The defaults grow to cover the
// model, in steps of 256; a k given with --k is left as it is (and checked by train).
Status cover_every_tensor(Task& task, const InitArgs& a, const TaskInitHost& host) {
  VT_ASSIGN_OR_RETURN(const training::StateCount state, host.measure(task));
  const auto clamped = [](std::uint64_t n) {
    return static_cast<std::int64_t>(std::min<std::uint64_t>(n, INT64_MAX));
  };
  const std::int64_t tensors = clamped(state.tensors), elements = clamped(state.elements);
  const std::int64_t covering = (tensors + 255) / 256 * 256;
  if (a.k <= 0 && task.fingerprint.k < tensors) task.fingerprint.k = covering;
  if (task.fingerprint.tracking_k < tensors) task.fingerprint.tracking_k = covering;
  // A model smaller than the default k is sampled whole: a k above its elements is refused.
  if (a.k <= 0) task.fingerprint.k = std::min(task.fingerprint.k, elements);
  task.fingerprint.tracking_k = std::min(task.fingerprint.tracking_k, elements);
  if (task.fingerprint.k < tensors) {
    return invalid_input("--k " + std::to_string(task.fingerprint.k) + ": the model has " +
                         std::to_string(tensors) +
                         " floating-point tensors and a fingerprint samples each at least once");
  }
  return {};
}

// Portable arithmetic (the same bits on any CPU) unless --determinism says otherwise, portable
// does not reach the task's device or precision, or --pin-environment asks for exact mode's
// pinned machine.
Determinism chosen_determinism(const Task& task, const InitArgs& a) {
  return !a.pin_environment && training::portable_reaches(task).ok() ? Determinism::kPortable
                                                                     : Determinism::kExact;
}

// A flag spelt as one of an enumeration's names; an empty flag leaves `out` as it was.
template <class Enum>
Status set_choice(const std::string& flag, const std::string& text, Enum& out) {
  if (text.empty()) return {};
  const std::optional<Enum> value = enum_named<Enum>(text);
  if (!value) {
    return invalid_input(flag + " " + text + ": expected one of " + quoted_names<Enum>());
  }
  out = *value;
  return {};
}

// "--model gtp: not a model; did you mean gpt?": a typo gets the name it missed.
Status check_model_name(const std::string& model) {
  std::vector<std::string> names;
  for (const training::ModelRow& m : training::zoo_models()) names.push_back(m.name);
  if (std::find(names.begin(), names.end(), model) != names.end()) return {};
  const std::string closest = closest_name(model, names);
  std::string all;
  for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
  return invalid_input("--model " + model + ": not a model" +
                       (closest.empty() ? "" : "; did you mean " + closest + "?") +
                       " (the models: " + all + ")");
}

// What task init adds when a TorchScript module falls back to exact mode: what that means for
// whoever verifies, and what to do, in short lines.
constexpr const char* kExactFallbackAdvice =
    "  exact mode replays bit for bit only in the provider's arithmetic environment (CPU kernel\n"
    "  level, oneDNN ISA, BLAS, LibTorch): a verifier on another kind of machine ends\n"
    "  inconclusive, never rejected (docs/environment.md)\n"
    "  to pin what this machine replays: add --pin-environment\n"
    "  to stay portable: write the module with the operators docs/portable.md lists\n";

Result<Task> build_task(const InitArgs& a, const TaskInitHost& host, bool& exact_fallback) {
  VT_RETURN_IF_ERROR(check_model_name(a.model));
  const training::ModelRow& model = *training::find_model(a.model);
  VT_ASSIGN_OR_RETURN(Task task, training::default_task(a.model, a.dataset));
  // An optimizer or schedule chosen on the command line comes with its own defaults: sgd's
  // momentum kept under adam would make the task invalid.
  if (!a.optimizer.empty()) task.optimizer = training::default_optimizer(model, a.optimizer);
  if (a.lr > 0) task.optimizer.lr = a.lr;
  if (!a.schedule.empty() || a.lr > 0) {
    task.schedule = training::default_schedule(
        model, a.schedule.empty() ? task.schedule.name : a.schedule, task.optimizer.lr);
  }
  apply_hyper_args(a.hyper, task);
  VT_RETURN_IF_ERROR(parse_options(a.model_options, task.model.options, "--option"));
  VT_RETURN_IF_ERROR(parse_options(a.data_options, task.dataset.options, "--data-option"));
  if (a.epochs > 0) task.epochs = a.epochs;
  if (a.steps >= 0) task.steps_per_epoch = a.steps;
  if (a.batch > 0) task.batch_size = a.batch;
  if (a.groups > 0) task.gradient_groups = a.groups;
  if (a.world > 0) task.world_size = a.world;
  if (a.threads > 0) task.intra_op_threads = a.threads;
  if (a.k > 0) task.fingerprint.k = a.k;
  if (a.trail >= 0) task.fingerprint.trail_interval = a.trail;
  VT_RETURN_IF_ERROR(set_choice("--device", a.device, task.device));
  VT_RETURN_IF_ERROR(set_choice("--precision", a.precision, task.precision));
  task.determinism = chosen_determinism(task, a);
  VT_RETURN_IF_ERROR(set_choice("--determinism", a.determinism, task.determinism));
  if (task.determinism == Determinism::kPortable)
    task.portable_arithmetic = training::implemented_portable_arithmetic();
  if (task.determinism == Determinism::kTolerance && task.tolerance.rel_l2 == 0.0) {
    // The calibrated thresholds of docs/tolerance.md: honest cross-thread-count spread times a
    // margin of 10. Convolutions spread most; the cnn row covers them, the gpt row the rest.
    task.tolerance = model.convolutional ? ToleranceSpec{2.3e-3, 0.0, 1.0e-3, 0.0}
                                         : ToleranceSpec{2.9e-4, 0.0, 1.1e-5, 0.0};
  }
  if (!a.seed.empty()) {
    // Decimal, or hex after 0x as before; a sign or trailing characters are refused.
    const std::string_view s = a.seed;
    const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    const std::optional<std::uint64_t> seed =
        parse_integer<std::uint64_t>(hex ? s.substr(2) : s, hex ? 16 : 10);
    if (!seed) return invalid_input("--seed: \"" + a.seed + "\" is not an unsigned integer");
    task.seed = *seed;
  }
  if (!a.data_dir.empty()) VT_RETURN_IF_ERROR(pin_data_files(task, a.data_dir));
  VT_RETURN_IF_ERROR(apply_data_flags(a.data, task));
  if (!a.model_file.empty()) {
    VT_ASSIGN_OR_RETURN(Bytes module, read_file(a.model_file));
    task.model.path = a.model_file;
    task.model.sha256 = hex_encode(sha256(module));
  }
  VT_ASSIGN_OR_RETURN(task.model.options, training::resolve_model_options(task.model));
  VT_ASSIGN_OR_RETURN(task.dataset.options, training::resolve_dataset_options(task));
  VT_ASSIGN_OR_RETURN(const std::string filled,
                      fill_model_options_from_data(task, a.model_options));
  if (!filled.empty()) {
    std::cerr << "task init: model.options " << filled
              << " from the data (--option NAME=VALUE chooses otherwise)\n";
  }
  VT_RETURN_IF_ERROR(validate_task(task));
  VT_RETURN_IF_ERROR(training::validate_for_training(task));
  if (!a.hyper.no_decay.empty()) {
    if (host.no_decay == nullptr) return internal_error("--no-decay: not in this program");
    VT_ASSIGN_OR_RETURN(task.optimizer.no_decay, host.no_decay(task, a.hyper.no_decay));
    VT_RETURN_IF_ERROR(validate_task(task));
  }
  if (Status covered = cover_every_tensor(task, a, host); !covered.ok()) {
    // A TorchScript module portable mode cannot run (an operator without a portable kernel)
    // trains in exact mode when nobody asked for portable: said on stderr with the reason, not
    // refused. A module exact mode cannot run either is refused with exact mode's reason.
    if (!a.determinism.empty() || task.determinism != Determinism::kPortable ||
        !model.user_module) {
      return covered.error();
    }
    task.determinism = Determinism::kExact;
    task.portable_arithmetic = 1;  // the field's default outside portable mode
    VT_RETURN_IF_ERROR(cover_every_tensor(task, a, host));
    const std::string& why = covered.error().message;
    std::cerr << "task init: determinism exact, not portable: " << why.substr(0, why.find('\n'))
              << "\n"
              << kExactFallbackAdvice;
    exact_fallback = true;
  }
  if (a.pin_environment) {
    if (task.determinism != Determinism::kExact || task.device != Device::kCpu) {
      return invalid_input(
          "--pin-environment: only an exact-mode CPU task's bits depend on the machine (this one "
          "is " +
          name_string(task.determinism) + " on " + name_string(task.device) + ")");
    }
    if (host.replayable == nullptr) return internal_error("--pin-environment: not in this program");
    task.environments = host.replayable(task, fs::path(a.out).parent_path());
    task.environments.erase("intra_op_threads");  // the task's own field already fixes it
    VT_RETURN_IF_ERROR(validate_task(task));
  }
  return task;
}

}  // namespace

void register_task_init(CLI::App& task, Context& ctx, const TaskInitHost& host) {
  auto a = std::make_shared<InitArgs>();
  auto* init = task.add_subcommand("init", summary_of("task init"));
  init->add_option("--model", a->model, "mlp | cnn | conv3d | gpt | torchscript")
      ->capture_default_str();
  init->add_option("--dataset", a->dataset, "synthetic | mnist | cifar10 | tensors | tokens")
      ->capture_default_str();
  init->add_option("--epochs", a->epochs, "Epochs to train");
  init->add_option("--steps-per-epoch", a->steps, "Optimizer steps per epoch (0 = one full pass)");
  init->add_option("--batch-size", a->batch, "Examples per step");
  init->add_option(
      "--gradient-groups", a->groups,
      "Groups per batch, summed along a fixed tree (a power of two; docs/training.md)");
  init->add_option("--world-size", a->world,
                   "Ranks `train` starts by default (not in the task_id)");
  init->add_option("--device", a->device, "cpu | cuda");
  init->add_option("--seed", a->seed,
                   "Seed for initialisation, data and order (u64, 0x... allowed)");
  init->add_option("--threads", a->threads,
                   "Intra-op threads (part of the task: exact mode's bits depend on it, "
                   "portable mode's do not)");
  init->add_option("--precision", a->precision, "fp32 | tf32 | bf16");
  init->add_option("--determinism", a->determinism,
                   "portable (veritrain's own arithmetic: the same bits on any CPU; the "
                   "default on CPUs in fp32) | exact | tolerance");
  init->add_option("--optimizer", a->optimizer, "sgd | adam | adamw");
  init->add_option("--schedule", a->schedule, "constant | step | cosine");
  init->add_option("--lr", a->lr, "Base learning rate");
  add_hyper_options(init, a->hyper);
  init->add_option("--k", a->k, "Values sampled per fingerprint");
  init->add_option("--trail-interval", a->trail,
                   "Steps between intra-epoch trail fingerprints (0 = none)");
  init->add_option("--option", a->model_options,
                   "Model option key=value (repeatable), e.g. width=32");
  init->add_option("--data-option", a->data_options,
                   "Dataset option key=value (repeatable), e.g. samples=1024");
  init->add_option("--data-dir", a->data_dir,
                   "Folder with MNIST idx or CIFAR-10 batch files to pin by SHA-256");
  init->add_option("--model-file", a->model_file, "TorchScript module file to pin by SHA-256");
  add_data_flags(init, a->data);
  init->add_flag("--pin-environment", a->pin_environment,
                 "Exact mode: accept only arithmetic environments this machine can replay "
                 "(docs/environment.md)");
  init->add_option("--out", a->out, "Write to this file (atomically) instead of stdout");
  init->add_flag("--list-options", a->list_options,
                 "Print the --option and --data-option names of --model and --dataset, with "
                 "defaults and ranges, and write no task");
  init->callback([&ctx, a, host] {
    ctx.action = [&ctx, a, host]() -> Result<int> {
      if (a->list_options) return list_options(ctx, *a);
      // Flags whose fit only the built model and its data can tell.
      const bool needs_model = a->pin_environment || !a->hyper.no_decay.empty() ||
                               a->hyper.crop_padding > 0 || a->hyper.flip;
      if (host.writes != nullptr && !host.writes(a->model, a->dataset, needs_model))
        return host.hand_over();
      bool exact_fallback = false;
      VT_ASSIGN_OR_RETURN(Task t, build_task(*a, host, exact_fallback));
      const std::string text = pretty_task_json(t) + "\n";
      if (!a->out.empty()) {
        VT_RETURN_IF_ERROR(write_file_atomic(a->out, text));
        std::cerr << "wrote " << a->out << " (task_id " << hex_encode(task_id(t)) << ")\n";
      }
      // Said once, here: task check and plan repeat only what still needs doing.
      if (t.determinism == Determinism::kPortable && a->determinism.empty()) {
        std::cerr << "task init: determinism portable: veritrain's own arithmetic, the same bits "
                     "on any CPU\n  (--determinism exact for LibTorch's kernels)\n";
      }
      if (const std::string warning = exact_mode_warning(t, {});
          !warning.empty() && !exact_fallback)
        std::cerr << "warning: " << warning << "\n";
      // LibTorch's kernels on a requestor's module: whether they give the same bits run after
      // run is the module's to prove, before anyone pays.
      if (t.determinism == Determinism::kExact && t.model.torchscript()) {
        std::cerr << "next: veritrain task check " << (a->out.empty() ? "TASK.json" : a->out)
                  << "\n  it trains the task in two fresh processes: a module whose bits change"
                     " from run\n  to run leaves every epoch unjudged\n";
      }
      if (ctx.json) {  // as `task show --json` prints it
        nlohmann::json j = {{"task_id", hex_encode(task_id(t))},
                            {"task", nlohmann::json::parse(canonical_task_json(t))}};
        if (!a->out.empty()) j["out"] = a->out;
        emit(ctx, j, "");
      } else if (a->out.empty()) {
        std::cout << text;
      }
      return 0;
    };
  });
}

}  // namespace vt::cli
