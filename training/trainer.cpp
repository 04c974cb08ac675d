#include "training/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <malloc.h>
#include <torch/version.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>

#include "common/sha256.h"
#include "kernels/parallel.h"
#include "protocol/task.h"
#include "training/data/data.h"
#include "training/distributed.h"
#include "training/internal/batches.h"
#include "training/internal/groups.h"
#include "training/internal/optimizer.h"
#include "training/internal/snapshot.h"
#include "training/model/models.h"
#include "training/model/network.h"
#include "training/prepared_task.h"
#include "training/runtime.h"
#include "training/script/module.h"
#include "training/zoo/schedule.h"
#include "training/zoo/sizes.h"
#include "training/zoo/zoo.h"

namespace vt::training {
namespace {
std::atomic<std::uint64_t> g_trainers_built{0};  // trainers_built()
}  // namespace

struct Trainer::Impl {
  Task task;
  Digest id{};
  TrainerOptions options;
  at::Device device{at::kCPU};
  std::string device_class;  // "cpu" | "cuda": what exact mode compares
  std::int64_t threads = 1;
  std::unique_ptr<Network> net;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<WeightAverage> average;  // optimizer.ema_decay > 0
  std::unique_ptr<GroupedStep> grouped;    // gradient_groups > 1 or several ranks
  at::Tensor inputs, targets;              // the whole dataset, on the device (built-in datasets)
  std::optional<MappedSplit> mapped;       // or batches read from memory-mapped files
  std::optional<MappedSplit> eval;         // the held-out split, evaluated at each epoch end
  std::int64_t dataset_size = 0;
  std::int64_t epoch = 0;
  std::int64_t global_step = 0;
  std::int64_t steps = 0;  // per epoch
  bool mid_epoch = false;  // an epoch ended early (EpochHooks::on_step_end): no snapshot
  std::vector<std::string> notes;

  // Thread counts are the process's, and one process may hold several trainers (a bench
  // alternating two, a verifier's replays): each puts its own in place before it computes.
  // Portable steps' kernels take the same count, where any count gives the same bits
  // (docs/portable.md, "Threads and vector lanes"), and so do the LibTorch operations between
  // them (copies, sums of two): LibTorch's count is set for them once, when the trainer is built.
  // Each change of LibTorch's count starts its thread pool (caffe2's pthreadpool) anew, and the
  // new thread spins on a core for milliseconds: changed before each epoch, it took a 2-thread
  // portable step's second core whenever a 1-thread trainer had run in between.
  void use_threads(bool building = false) const {
    if (task.determinism == Determinism::kPortable) {
      kernels::set_threads(static_cast<int>(threads));
      if (!building) return;
    }
    if (at::get_num_threads() != threads) at::set_num_threads(static_cast<int>(threads));
  }
  NamedTensors state_tensors() const;
  Metadata metadata() const;
  Result<EpochSummary> train_epoch(const EpochHooks& hooks, const Trainer& owner);
};

namespace {

// Autocast for bf16 tasks, on both LibTorch generations (the API moved in 2.x).
class AutocastScope {
 public:
  AutocastScope(bool enabled, at::DeviceType device) : enabled_(enabled), device_(device) {
    if (!enabled_) return;
#if TORCH_VERSION_MAJOR >= 2
    at::autocast::set_autocast_dtype(device_, at::kBFloat16);
    at::autocast::set_autocast_enabled(device_, true);
#else
    if (device_ == at::kCUDA) {
      at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
      at::autocast::set_enabled(true);
    } else {
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::set_cpu_enabled(true);
    }
#endif
  }
  ~AutocastScope() {
    if (!enabled_) return;
#if TORCH_VERSION_MAJOR >= 2
    at::autocast::set_autocast_enabled(device_, false);
#else
    if (device_ == at::kCUDA) {
      at::autocast::set_enabled(false);
    } else {
      at::autocast::set_cpu_enabled(false);
    }
#endif
    at::autocast::clear_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_;
  at::DeviceType device_;
};

// The moving average in the model's tensors for a scope (evaluation, export), put back at its
// end however the scope ends: a throwing forward must not leave the average as the weights.
class AverageInPlace {
 public:
  explicit AverageInPlace(WeightAverage* average) : average_(average) {
    if (average_) average_->swap();
  }
  ~AverageInPlace() {
    if (average_) average_->swap();
  }
  AverageInPlace(const AverageInPlace&) = delete;
  AverageInPlace& operator=(const AverageInPlace&) = delete;

 private:
  WeightAverage* average_;
};

at::Generator cpu_generator() { return at::globalContext().defaultGenerator(at::kCPU); }
at::Generator cuda_generator(const at::Device& d) {
  return at::globalContext().defaultGenerator(at::Device(at::kCUDA, d.has_index() ? d.index() : 0));
}

Result<at::Device> resolve_device(const std::string& name) {
  if (name.rfind("cuda", 0) == 0) {
    // cuBLAS reads this when it creates its first handle; deterministic GEMMs need it.
    ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
    if (!at::hasCUDA() || at::getNumGPUs() == 0) {
      return invalid_input("device: \"" + name +
                           "\" requested but CUDA is not available in this build or machine");
    }
    at::Device d(at::kCUDA, 0);
    if (name.size() > 5) {
      if (name[4] != ':')
        return invalid_input("device: expected cpu, cuda or cuda:N, got \"" + name + "\"");
      int index = std::atoi(name.c_str() + 5);
      if (index < 0 || index >= static_cast<int>(at::getNumGPUs())) {
        return invalid_input("device: " + name + " does not exist on this machine");
      }
      d = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
    }
    return d;
  }
  if (name != "cpu")
    return invalid_input("device: expected cpu, cuda or cuda:N, got \"" + name + "\"");
  return at::Device(at::kCPU);
}

void apply_determinism(const Task& task, const at::Device& device, bool deterministic) {
  install_libtorch_repairs();
  auto& ctx = at::globalContext();
  ctx.setDeterministicAlgorithms(deterministic, /*warn_only=*/false);
  if (device.is_cuda()) {
    ctx.setBenchmarkCuDNN(!deterministic);
    ctx.setDeterministicCuDNN(deterministic);
    // TF32 changes results but not their reproducibility (measured bit-identical on an H200).
    const bool tf32 = task.precision != Precision::kFp32;
    ctx.setAllowTF32CuBLAS(tf32);
    ctx.setAllowTF32CuDNN(tf32);
  }
}

at::Tensor to_tensor(const std::vector<float>& v, const std::vector<std::int64_t>& shape,
                     const at::Device& d) {
  return at::from_blob(const_cast<float*>(v.data()), shape, at::kFloat)
      .to(d, /*non_blocking=*/false, /*copy=*/true);
}
at::Tensor to_tensor(const std::vector<std::int64_t>& v, const std::vector<std::int64_t>& shape,
                     const at::Device& d) {
  return at::from_blob(const_cast<std::int64_t*>(v.data()), shape, at::kLong).to(d, false, true);
}

template <typename F>
auto guarded(const char* what, F&& fn, bool user_module = false) -> decltype(fn()) {
  try {
    return fn();
  } catch (const ModelError& e) {
    return invalid_input(e.what());
  } catch (const c10::Error& e) {
    // Training a user's module, LibTorch fails on what the module does (an in-place change
    // that its backward pass needed): bad input, in the module's words.
    if (user_module)
      return invalid_input(std::string(what) +
                           ": the model failed: " + model_message(e.what_without_backtrace()));
    return internal_error(std::string(what) + ": LibTorch: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return internal_error(std::string(what) + ": " + e.what());
  }
}

// A training step allocates and frees the same buffers every step, many above glibc's
// default mmap threshold (128 KiB, growing only as such blocks are freed): each came back as
// fresh zeroed pages, and the page faults took a quarter of a portable cnn step. Keeping blocks
// up to the largest threshold glibc allows (32 MiB) in the heap, and not trimming it, reuses
// them. Memory use stays at the step's peak, which sizes.h already budgets; no result changes.
void keep_step_memory() {
#if defined(__GLIBC__)
  static const bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)done;
#endif
}

// Builds model, optimizer and data for `task` on a fresh process-wide setup. The data's shape
// comes first: every size is checked against it and this machine's memory (sizes.h) before the
// model, the data's tensors or the epoch's order take a byte.
Result<std::unique_ptr<Trainer::Impl>> build(const Task& task, const TrainerOptions& options) {
  g_trainers_built.fetch_add(1);
  VT_ASSIGN_OR_RETURN(PreparedTask prepared, prepare_task(task, options));
  const TrainingTask& resolved = prepared.resolved;
  keep_step_memory();
  auto impl = std::make_unique<Trainer::Impl>();
  impl->task = task;
  impl->id = prepared.id;
  impl->options = options;
  VT_ASSIGN_OR_RETURN(impl->device, resolve_device(prepared.device));
  impl->device_class = impl->device.is_cuda() ? "cuda" : "cpu";
  std::optional<Dataset> data;
  DataShape shape;
  if (resolved.zoo_dataset().memory_mapped) {
    VT_ASSIGN_OR_RETURN(impl->mapped,
                        open_mapped_split(resolved, options.task_dir, task.dataset.files, "train"));
    VT_ASSIGN_OR_RETURN(impl->eval, open_eval_split(resolved, options.task_dir, *impl->mapped));
    shape = mapped_shape(*impl->mapped->data, resolved);
    const MappedSplit& m = *impl->mapped;
    VT_RETURN_IF_ERROR(check_augmentable_input(
        task, m.data->inputs().shape,
        m.input_type ? *m.input_type == at::kFloat : m.data->inputs().dtype == DType::kF32));
  } else if (resolved.zoo_dataset().kind == DatasetKind::kSynthetic) {
    shape = synthetic_shape(resolved);
  } else {
    VT_ASSIGN_OR_RETURN(data, load_dataset(resolved, options.task_dir));
    shape = resident_shape(*data);
  }
  VT_ASSIGN_OR_RETURN(TaskSizes sizes, check_sizes(resolved, shape, usable_memory()));
  impl->dataset_size = shape.examples;
  impl->steps = sizes.steps;

  impl->threads = prepared.threads;
  impl->use_threads(/*building=*/true);
  apply_determinism(task, impl->device, options.deterministic_algorithms);

  // Initialise on the CPU from the task seed, then move: the same initial weights on any device.
  {
    auto gen = cpu_generator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(task.seed);
  }
  if (impl->device.is_cuda()) {
    auto gen = cuda_generator(impl->device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(task.seed);
  }
  if (resolved.zoo_model().user_module) {
    VT_ASSIGN_OR_RETURN(impl->net, load_torchscript(task, options.task_dir));
  } else {
    VT_ASSIGN_OR_RETURN(impl->net, make_zoo_network(resolved));
  }
  if (impl->net->portable()) {
    impl->net->init_portable(task.seed);
  }
  impl->net->to(impl->device);
  impl->net->set_training(true);
  if (options.checkpoint_activations && !impl->net->checkpoint_activations(true)) {
    return invalid_input("--checkpoint-activations: model \"" + task.model.name +
                         "\" has no blocks to checkpoint (the zoo's gpt has)");
  }
  VT_RETURN_IF_ERROR(check_no_decay(task.optimizer, impl->net->parameters()));
  impl->optimizer =
      std::make_unique<Optimizer>(task.optimizer, impl->net->parameters(), impl->net->portable());
  if (task.optimizer.ema_decay > 0.0) {
    NamedTensors own = impl->net->parameters();
    for (auto& entry : impl->net->buffers()) own.push_back(entry);
    impl->average =
        std::make_unique<WeightAverage>(task.optimizer.ema_decay, own, impl->net->portable());
  }
  if (task.gradient_groups > 1 || (options.collective && options.collective->world_size() > 1)) {
    try {
      impl->grouped =
          std::make_unique<GroupedStep>(task.gradient_groups, *impl->net, options.collective);
    } catch (const std::invalid_argument& e) {
      return invalid_input(e.what());
    }
  }
  if (impl->mapped) return impl;
  if (!data) {
    VT_ASSIGN_OR_RETURN(data, load_dataset(resolved, options.task_dir));
  }
  VT_RETURN_IF_ERROR(check_augmentable_input(task, data->input_shape, !data->tokens()));
  impl->inputs =
      data->tokens()
          ? to_tensor(data->token_inputs, batched(data->size, data->input_shape), impl->device)
          : to_tensor(data->inputs, batched(data->size, data->input_shape), impl->device);
  impl->targets =
      data->float_targets.empty()
          ? to_tensor(data->class_targets, batched(data->size, data->target_shape), impl->device)
          : to_tensor(data->float_targets, batched(data->size, data->target_shape), impl->device);
  return impl;
}

// The thread count a snapshot records: the one that ran, except in portable mode, where it
// changes no bit and is the provider's choice, so the task's keeps every run's bytes alike.
std::int64_t snapshot_threads(const Trainer::Impl& impl) {
  return impl.task.determinism == Determinism::kPortable ? impl.task.intra_op_threads
                                                         : impl.threads;
}

// In exact mode a replay must run where the original ran; in tolerance mode differences are
// allowed and written down for the verdict.
Status check_snapshot_metadata(const Metadata& meta, Trainer::Impl& impl) {
  for (const char* key :
       {"format", "task_id", "epoch", "global_step", "intra_op_threads", "device", "precision"}) {
    if (meta.find(key) == meta.end())
      return invalid_input(std::string("snapshot: __metadata__ lacks \"") + key + "\"");
  }
  if (meta.at("format") != kSnapshotFormat) {
    return invalid_input("snapshot: format is \"" + meta.at("format") + "\", expected " +
                         kSnapshotFormat);
  }
  if (meta.at("task_id") != hex_encode(impl.id)) {
    return invalid_input("snapshot: it belongs to task " + meta.at("task_id") +
                         ", not to this task " + hex_encode(impl.id));
  }
  if (meta.at("precision") != name_of(impl.task.precision)) {
    return invalid_input("snapshot: precision " + meta.at("precision") +
                         " differs from the task's " + name_string(impl.task.precision));
  }
  const bool exact = replays_bit_for_bit(impl.task) && impl.options.restore_for_replay;
  const std::string threads = std::to_string(snapshot_threads(impl));
  if (meta.at("intra_op_threads") != threads) {
    std::string msg = "snapshot was made with " + meta.at("intra_op_threads") +
                      " intra-op threads, this replay uses " + threads;
    if (exact)
      return invalid_input(msg + "; " + name_string(impl.task.determinism) +
                           " mode needs the same count (run with the task's intra_op_threads)");
    impl.notes.push_back(msg);
  }
  if (meta.at("device") != impl.device_class) {
    std::string msg =
        "snapshot was made on " + meta.at("device") + ", this replay runs on " + impl.device_class;
    if (exact)
      return invalid_input(msg + "; " + name_string(impl.task.determinism) +
                           " mode needs the same device class");
    impl.notes.push_back(msg);
  }
  char* end = nullptr;
  for (const char* key : {"epoch", "global_step"}) {
    const std::string& v = meta.at(key);
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < 0)
      return invalid_input(std::string("snapshot: ") + key + " \"" + v + "\" is not a count");
  }
  return {};
}

}  // namespace

NamedTensors Trainer::Impl::state_tensors() const {
  NamedTensors out;
  for (auto& [name, t] : net->parameters()) out.emplace_back("param/" + name, t);
  for (auto& [name, t] : net->buffers()) out.emplace_back("buffer/" + name, t);
  for (auto& entry : optimizer->state()) out.push_back(entry);
  if (average)
    for (auto& entry : average->state()) out.push_back(entry);
  out.emplace_back("rng/cpu", cpu_generator().get_state());
  if (device.is_cuda()) out.emplace_back("rng/cuda", cuda_generator(device).get_state());
  return out;
}

Metadata Trainer::Impl::metadata() const {
  return {{"format", kSnapshotFormat},
          {"task_id", hex_encode(id)},
          {"epoch", std::to_string(epoch)},
          {"global_step", std::to_string(global_step)},
          {"data_cursor", std::to_string(epoch)},
          {"intra_op_threads", std::to_string(snapshot_threads(*this))},
          {"device", device_class},
          {"precision", name_string(task.precision)}};
}

Result<EpochSummary> Trainer::Impl::train_epoch(const EpochHooks& hooks, const Trainer& owner) {
  if (mid_epoch)
    return internal_error(
        "training: the last epoch was ended after a step; this trainer holds no "
        "epoch boundary to go on from");
  use_threads();
  const auto start = std::chrono::steady_clock::now();
  const std::int64_t this_epoch = epoch + 1;
  const std::int64_t batch = task.batch_size;
  VT_ASSIGN_OR_RETURN(std::vector<std::int64_t> order,
                      mapped ? mapped_order(*mapped->data, task.seed, this_epoch, steps, batch)
                             : epoch_order(task.seed, this_epoch, dataset_size, steps, batch));
  at::Tensor order_t =
      mapped ? at::Tensor() : to_tensor(order, {static_cast<std::int64_t>(order.size())}, device);
  const bool bf16 = task.precision == Precision::kBf16;
  at::Tensor loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device));
  for (std::int64_t s = 0; s < steps; ++s) {
    if (hooks.on_step_begin) hooks.on_step_begin(s + 1);
    at::Tensor x, y;
    if (mapped) {
      VT_ASSIGN_OR_RETURN(std::tie(x, y), mapped->batch(std::span(order).subspan(
                                                            static_cast<std::size_t>(s * batch),
                                                            static_cast<std::size_t>(batch)),
                                                        device));
    } else {
      at::Tensor idx = order_t.narrow(0, s * batch, batch);
      x = inputs.index_select(0, idx);
      y = targets.index_select(0, idx);
    }
    if (task.dataset.augment.any()) x = augment_batch(x, task, this_epoch, s * batch);
    const double lr = learning_rate(task, global_step, this_epoch, steps * task.epochs);
    optimizer->zero_grad();
    at::Tensor loss;
    if (grouped) {
      loss = grouped->run(x, y, [&](const at::Tensor& gx, const at::Tensor& gy, std::int64_t g) {
        AutocastScope autocast(bf16, device.type());
        net->begin_forward(global_step, g);
        return step_loss(loss_of(task), *net, gx, gy);
      });
    } else {
      {
        AutocastScope autocast(bf16, device.type());
        net->begin_forward(global_step, 0);
        loss = step_loss(loss_of(task), *net, x, y);
      }
      loss.backward();
    }
    optimizer->step(lr);
    if (average) average->update();
    ++global_step;
    loss_sum += loss.detach().to(at::kDouble);
    const std::int64_t done = s + 1;
    if (hooks.on_progress && hooks.progress_every > 0 &&
        (done % hooks.progress_every == 0 || done == steps)) {
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      hooks.on_progress({this_epoch, done, steps, loss.item<double>(), secs,
                         secs > 0 ? static_cast<double>(done * batch) / secs : 0.0});
    }
    if (hooks.on_trail && hooks.trail_every > 0 && done % hooks.trail_every == 0) {
      epoch = this_epoch;  // the callback sees the epoch it is inside of
      hooks.on_trail(done, owner);
      epoch = this_epoch - 1;
    }
    if (hooks.on_step_end && !hooks.on_step_end(done)) {
      mid_epoch = true;
      EpochSummary partial;
      partial.epoch = this_epoch;
      partial.steps = done;
      partial.samples = done * batch;
      return partial;
    }
  }
  epoch = this_epoch;
  EpochSummary summary;
  summary.epoch = this_epoch;
  summary.steps = steps;
  summary.samples = steps * batch;
  summary.mean_loss = loss_sum.item<double>() / static_cast<double>(steps);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.data_order_digest = order_digest(order);
  if (eval) {
    // With a moving average, the held-out metrics are the average's (what a recipe reports and
    // export writes); the swap back restores every bit.
    AverageInPlace in_place(average.get());
    VT_ASSIGN_OR_RETURN(summary.eval, evaluate_split(*net, *eval, task, device));
  }
  return summary;
}

Status Trainer::check_model() {
  return guarded("checking the model against the data", [&]() -> Status {
    Impl& m = *impl_;
    m.use_threads();
    // A forward pass in training mode draws random numbers (dropout) and moves running
    // statistics (BatchNorm): both are put back, so the state stays the committed one.
    auto gen = cpu_generator();
    const at::Tensor cpu_rng = gen.get_state();
    const at::Tensor cuda_rng =
        m.device.is_cuda() ? cuda_generator(m.device).get_state() : at::Tensor();
    std::vector<at::Tensor> saved;
    for (auto& [name, b] : m.net->buffers()) saved.push_back(b.clone());
    const std::int64_t n = std::min(m.task.batch_size, m.dataset_size);
    at::Tensor x, y, all_targets;
    if (m.mapped) {
      // Memory-mapped data is never resident as a whole: the first batch's classes are what
      // is checked here (the dataset's own checks have seen every file already).
      std::vector<std::int64_t> first(static_cast<std::size_t>(n));
      std::iota(first.begin(), first.end(), std::int64_t{0});
      VT_ASSIGN_OR_RETURN(std::tie(x, y), m.mapped->batch(first, m.device));
      all_targets = y;
    } else {
      x = m.inputs.narrow(0, 0, n);
      y = m.targets.narrow(0, 0, n);
      all_targets = m.targets;
    }
    const std::int64_t max_class =
        at::isIntegralType(all_targets.scalar_type(), false) && all_targets.numel() > 0
            ? all_targets.max().item<std::int64_t>()
            : -1;
    Status fits;
    {
      c10::NoGradGuard no_grad;
      AutocastScope autocast(m.task.precision == Precision::kBf16, m.device.type());
      fits = check_model_fits(m.task.loss, *m.net, x, y, max_class);
    }
    std::size_t i = 0;
    for (auto& [name, b] : m.net->buffers()) b.copy_(saved[i++]);
    gen.set_state(cpu_rng);
    if (cuda_rng.defined()) cuda_generator(m.device).set_state(cuda_rng);
    return fits;
  });
}

Result<Bytes> Trainer::export_safetensors(bool averaged) const {
  return guarded("exporting the model", [&]() -> Result<Bytes> {
    NamedTensors own = impl_->net->parameters();
    for (auto& entry : impl_->net->buffers()) own.push_back(entry);
    for (auto& [name, t] : own) {
      at::Tensor average =
          averaged && impl_->average ? impl_->average->average_of(name) : at::Tensor();
      t = (average.defined() ? average : t).detach().to(at::kCPU);
    }
    return encode_snapshot(own, {{"format", "veritrain/export/v1"},
                                 {"task_id", hex_encode(impl_->id)},
                                 {"epoch", std::to_string(impl_->epoch)}});
  });
}

Status Trainer::export_torchscript(const std::filesystem::path& file, bool averaged) const {
  return guarded("exporting the model", [&] {
    AverageInPlace in_place(averaged ? impl_->average.get() : nullptr);
    return impl_->net->save_torchscript(file);
  });
}

Trainer::Trainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer::~Trainer() = default;

Result<std::unique_ptr<Trainer>> Trainer::create(const Task& task, const TrainerOptions& options) {
  return guarded("creating the trainer", [&]() -> Result<std::unique_ptr<Trainer>> {
    VT_ASSIGN_OR_RETURN(auto impl, build(task, options));
    return std::unique_ptr<Trainer>(new Trainer(std::move(impl)));
  });
}

Result<EpochSummary> Trainer::train_epoch(const EpochHooks& hooks) {
  return guarded(
      "training", [&] { return impl_->train_epoch(hooks, *this); },
      impl_->task.model.torchscript());
}

Result<Bytes> Trainer::snapshot() const {
  return guarded("capturing a snapshot", [&]() -> Result<Bytes> {
    if (impl_->mid_epoch)
      return internal_error(
          "capturing a snapshot: the epoch was ended after a step; the state "
          "is no epoch boundary");
    return encode_snapshot(impl_->state_tensors(), impl_->metadata());
  });
}

Status Trainer::snapshot_into(Bytes& out) const {
  return guarded("capturing a snapshot", [&]() -> Status {
    if (impl_->mid_epoch)
      return internal_error(
          "capturing a snapshot: the epoch was ended after a step; the state "
          "is no epoch boundary");
    return encode_snapshot_into(impl_->state_tensors(), impl_->metadata(), out);
  });
}

Result<std::unique_ptr<Trainer::CanonicalSource>> Trainer::canonical_source() const {
  return guarded("capturing a snapshot", [&]() -> Result<std::unique_ptr<CanonicalSource>> {
    if (impl_->mid_epoch)
      return internal_error(
          "capturing a snapshot: the epoch was ended after a step; the state "
          "is no epoch boundary");
    return live_canonical_source(impl_->state_tensors(), impl_->metadata());
  });
}

std::vector<TensorEntry> Trainer::layout() const {
  auto planned = plan_canonical(tensor_specs(impl_->state_tensors()), impl_->metadata());
  return planned.ok() ? planned->tensors : std::vector<TensorEntry>{};
}

Result<Bytes> Trainer::gather(std::string_view name, std::span<const std::uint64_t> indices) const {
  const GatherRequest request[] = {{name, indices}};
  VT_ASSIGN_OR_RETURN(std::vector<Bytes> values, gather_many(request));
  return std::move(values.front());
}

Result<std::vector<Bytes>> Trainer::gather_many(std::span<const GatherRequest> requests) const {
  return guarded("gathering fingerprint values", [&]() -> Result<std::vector<Bytes>> {
    std::map<std::string, at::Tensor, std::less<>> state;
    for (auto& [name, t] : impl_->net->parameters()) state.emplace("param/" + name, t);
    for (auto& [name, t] : impl_->net->buffers()) state.emplace("buffer/" + name, t);
    for (auto& [name, t] : impl_->optimizer->state()) state.emplace(name, t);
    if (impl_->average)
      for (auto& [name, t] : impl_->average->state()) state.emplace(name, t);
    std::vector<at::Tensor> tensors;
    std::vector<std::span<const std::uint64_t>> indices;
    std::vector<std::string> names;
    for (const GatherRequest& r : requests) {
      auto it = state.find(r.name);
      if (it == state.end())
        return invalid_input("gather: no tensor \"" + std::string(r.name) +
                             "\" in the training state");
      // Optimizer step counters live on the CPU; everything sampled lives with the model.
      tensors.push_back(it->second.device() == impl_->device ? it->second
                                                             : it->second.to(impl_->device));
      indices.push_back(r.indices);
      names.emplace_back(r.name);
    }
    return gather_values_many(tensors, indices, names);
  });
}

std::int64_t Trainer::epoch() const { return impl_->epoch; }
bool Trainer::averages_weights() const { return impl_->average != nullptr; }
std::int64_t Trainer::global_step() const { return impl_->global_step; }
std::int64_t Trainer::steps_per_epoch() const { return impl_->steps; }
std::int64_t Trainer::dataset_size() const { return impl_->dataset_size; }
std::string Trainer::device() const { return impl_->device.str(); }
const std::vector<std::string>& Trainer::replay_notes() const { return impl_->notes; }

std::vector<ParameterInfo> Trainer::parameter_info() const {
  const std::map<std::string, std::string> modules = impl_->net->parameter_modules();
  std::vector<ParameterInfo> out;
  for (auto& [name, t] : impl_->net->parameters()) {
    const auto it = modules.find(name);
    out.push_back({name, t.sizes().vec(), it == modules.end() ? std::string() : it->second});
  }
  return out;
}

std::int64_t Trainer::parameter_count() const {
  std::int64_t n = 0;
  for (auto& [name, t] : impl_->net->parameters()) n += t.numel();
  return n;
}

namespace {

// The state of `view` into `impl`'s live tensors: what restore does after building, and what
// load does to a trainer that already holds another state.
Status load_snapshot(const SafetensorsView& view, Trainer::Impl& impl) {
  impl.notes.clear();
  VT_RETURN_IF_ERROR(check_snapshot_metadata(view.metadata, impl));
  VT_RETURN_IF_ERROR(load_state(view, impl.state_tensors(), impl.device));
  impl.epoch = std::stoll(view.metadata.at("epoch"));
  impl.global_step = std::stoll(view.metadata.at("global_step"));
  impl.mid_epoch = false;
  return {};
}

}  // namespace

Result<std::unique_ptr<Trainer>> Trainer::restore(const Task& task, ByteSpan snapshot,
                                                  const TrainerOptions& options) {
  return guarded("restoring a snapshot", [&]() -> Result<std::unique_ptr<Trainer>> {
    VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(snapshot));
    VT_ASSIGN_OR_RETURN(auto impl, build(task, options));
    VT_RETURN_IF_ERROR(load_snapshot(view, *impl));
    return std::unique_ptr<Trainer>(new Trainer(std::move(impl)));
  });
}

Status Trainer::load(ByteSpan snapshot) {
  return guarded("restoring a snapshot", [&]() -> Status {
    VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(snapshot));
    // The process's thread counts and generators are this trainer's again (another may have
    // run since it was built).
    impl_->use_threads(/*building=*/true);
    return load_snapshot(view, *impl_);
  });
}

std::uint64_t trainers_built() { return g_trainers_built.load(); }

}  // namespace vt::training
