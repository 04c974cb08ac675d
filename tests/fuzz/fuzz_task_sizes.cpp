// libFuzzer target for a task's numeric fields as `train` and `task check` use them (sizes,
// counts, rates): any task text is refused as input, naming the field, or its sizes fit and
// everything `train` computes from them before LibTorch takes over fits too. Never a crash, an
// overflow, an allocation past the bound, or an error that would exit 4 (internal).
//
// The harness runs what the trainer runs with the task's sizes, minus LibTorch: parse_task,
// validate_for_training, check_sizes against the data's shape and a fixed 64 MiB of memory (so
// that whatever is accepted is cheap to run here), then the synthetic data, the epoch order of
// the first and last epoch, the learning rate at both ends of the task, and
// check_fingerprint_sizes over two real layouts. Data the harness cannot open (files) is given
// the shape of the model's synthetic data and a count of examples drawn from the task's seed.

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "training/data/data.h"
#include "training/zoo/schedule.h"
#include "training/zoo/sizes.h"
#include "training/zoo/zoo.h"

namespace {

using vt::training::DataShape;

constexpr std::uint64_t kMemory = std::uint64_t{64} << 20;

// Refused as the caller's own input, never as a bug; and the message starts with what was
// wrong: a field's path, or the file the task came from.
void expect_input_error(const vt::Error& e) {
  if (e.code != vt::Errc::kInvalidInput) std::abort();
  static const std::vector<std::string_view> fields = {"task.json: ",  "task: ",
                                                       "batch_size: ", "steps_per_epoch: ",
                                                       "epochs: ",     "intra_op_threads: ",
                                                       "model.",       "dataset",
                                                       "loss: ",       "fingerprint.",
                                                       "optimizer.",   "schedule."};
  for (std::string_view f : fields) {
    if (e.message.rfind(f, 0) == 0) return;
  }
  std::abort();
}

// A snapshot's layout: names, dtypes and shapes, as the trainer lists them.
std::vector<vt::TensorEntry> layout(
    std::initializer_list<std::pair<const char*, std::vector<std::int64_t>>> tensors) {
  std::vector<vt::TensorEntry> out;
  for (const auto& [name, shape] : tensors) out.push_back({name, vt::DType::kF32, shape, 0, 0});
  out.push_back({"rng/cpu", vt::DType::kU8, {5056}, 0, 0});
  return out;
}

// The default mlp's state with momentum, and a gpt-sized one with tensors of 2^26 values.
const std::vector<vt::TensorEntry>& small_state() {
  static const auto l = layout({{"optim/body.0.bias/momentum_buffer", {64}},
                                {"optim/body.0.weight/momentum_buffer", {64, 32}},
                                {"optim/body.2.bias/momentum_buffer", {4}},
                                {"optim/body.2.weight/momentum_buffer", {4, 64}},
                                {"param/body.0.bias", {64}},
                                {"param/body.0.weight", {64, 32}},
                                {"param/body.2.bias", {4}},
                                {"param/body.2.weight", {4, 64}}});
  return l;
}
const std::vector<vt::TensorEntry>& large_state() {
  static const auto l = layout({{"optim/lm_head.weight/exp_avg", {65536, 1024}},
                                {"optim/lm_head.weight/exp_avg_sq", {65536, 1024}},
                                {"param/lm_head.weight", {65536, 1024}},
                                {"param/tok.weight", {65536, 1024}}});
  return l;
}

// What `train` computes from the sizes before LibTorch does, at the sizes just accepted.
void run_accepted(const vt::training::TrainingTask& resolved, const DataShape& shape,
                  const vt::training::TaskSizes& s) {
  using namespace vt::training;
  const vt::Task& task = resolved.task;
  if (s.steps < 1 || s.memory > kMemory || s.total_steps > (std::uint64_t{1} << 53)) std::abort();
  if (task.dataset.name == "synthetic") {
    auto data = load_dataset(resolved, ".");
    if (!data.ok()) std::abort();
    const DataShape loaded = resident_shape(*data);
    if (loaded.examples != shape.examples || loaded.input_bytes != shape.input_bytes ||
        loaded.target_bytes != shape.target_bytes)
      std::abort();
  }
  if (shape.permuted == shape.examples) {
    const auto needed = static_cast<std::size_t>(s.steps * task.batch_size);
    for (std::int64_t epoch : {std::int64_t{1}, task.epochs}) {
      auto order = epoch_order(task.seed, epoch, shape.examples, s.steps, task.batch_size);
      if (!order.ok() || order->size() != needed) std::abort();
    }
  }
  const auto total = static_cast<std::int64_t>(s.total_steps);
  for (auto [step, epoch] :
       {std::pair{std::int64_t{0}, std::int64_t{1}}, {total - 1, task.epochs}}) {
    const double lr = learning_rate(task, step, epoch, total);
    if (std::isnan(lr) || lr < 0) std::abort();
  }
  for (const auto* state : {&small_state(), &large_state()}) {
    auto f = check_fingerprint_sizes(task, s.steps, *state);
    if (!f.ok()) expect_input_error(f.error());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace vt::training;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto task = vt::parse_task(text, "task.json");
  if (!task.ok()) {
    expect_input_error(task.error());
    return 0;
  }
  auto resolved = resolve_for_training(*task);
  if (!resolved.ok()) {
    expect_input_error(resolved.error());
    return 0;
  }
  DataShape shape;
  if (task->dataset.name == "synthetic") {
    shape = synthetic_shape(*resolved);
  } else {
    TrainingTask as_synthetic = *resolved;
    as_synthetic.dataset = {{"samples", 1}, {"input_dim", 32}, {"classes", 4}};
    shape = synthetic_shape(as_synthetic);
    shape.examples = 1 + static_cast<std::int64_t>(task->seed % (std::uint64_t{1} << 40));
    // MNIST and CIFAR-10 are loaded whole; tensors rows are permuted, token windows drawn.
    shape.resident = task->dataset.name == "mnist" || task->dataset.name == "cifar10";
    shape.permuted = task->dataset.name == "tokens" ? 0 : shape.examples;
  }
  auto sizes = check_sizes(*resolved, shape, kMemory);
  if (!sizes.ok()) {
    expect_input_error(sizes.error());
    return 0;
  }
  run_accepted(*resolved, shape, *sizes);
  return 0;
}
