#include "training/zoo/sizes.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "fingerprint/sampling.h"
#include "protocol/log.h"
#include "training/zoo/saturating.h"

namespace vt::training {
namespace {

using saturating::add;
using saturating::kAll;
using saturating::mul;
using saturating::u;

// More threads than any machine has cores only oversubscribe, and OpenMP aborts the process
// when it cannot start them.
constexpr std::int64_t kMaxIntraOpThreads = 1024;
// The schedule turns step counts into doubles: past 2^53 two steps would get one rate.
constexpr std::uint64_t kMaxTotalSteps = std::uint64_t{1} << 53;

// kAll stands for a sum that overflowed.
std::string show_bytes(std::uint64_t n) {
  return n == kAll ? "more than 16 EiB" : size_text(static_cast<double>(n));
}

std::string options_text(const Options& options) {
  std::string out;
  for (const auto& [name, value] : options)
    out += (out.empty() ? "" : ", ") + name + " " + std::to_string(value);
  return out;
}

// Floats a forward pass keeps per example until the backward pass (layer outputs, attention
// scores and probabilities), counting only what the model certainly holds; none known for a user
// module, whose activations its step's measurement shows (estimate).
std::uint64_t activation_floats(const TrainingTask& resolved) {
  const ModelRow& m = resolved.zoo_model();
  return m.activation_floats ? m.activation_floats(resolved.model) : 0;
}

std::uint64_t optimizer_slots(const OptimizerSpec& o) {
  if (o.name == "adam" || o.name == "adamw") return 2;
  return o.momentum != 0.0 ? 1 : 0;
}

// What training a task holds at once, at least: the model's state (weights, gradients, optimizer
// slots and a snapshot of weights and slots), the built-in data (its array and its tensor), the
// epoch's example order (u64 indices, a tensor copy too for built-in data, and the permutation of
// every position a pass draws them from) and one step (the batch's inputs and targets, one
// gradient group's activations).
struct Need {
  std::uint64_t state = 0, data = 0, order = 0, step = 0;
  std::uint64_t total() const { return add(add(state, data), add(order, step)); }
};

// Weights, gradients, optimizer slots, and a snapshot of weights and slots.
std::uint64_t state_bytes(const TrainingTask& resolved) {
  return mul(zoo_parameter_count(resolved), 4, 3 + 2 * optimizer_slots(resolved.task.optimizer));
}

struct Sizing {
  const TrainingTask& resolved;
  const Task& task;
  const Options& model;
  const DataShape& data;

  std::int64_t steps(std::int64_t examples, std::int64_t batch, std::int64_t steps_field) const {
    Task t = task;
    t.batch_size = batch;
    t.steps_per_epoch = steps_field;
    return steps_per_epoch(t, examples);
  }
  Need need(std::int64_t examples, std::int64_t batch, std::int64_t steps_field) const {
    const std::uint64_t copies = data.resident ? 2 : 1;
    const std::uint64_t example = add(data.input_bytes, data.target_bytes);
    const std::uint64_t group = (u(batch) + u(task.gradient_groups) - 1) / u(task.gradient_groups);
    Need n;
    n.state = state_bytes(resolved);
    if (data.resident) n.data = mul(u(examples), example, 2);
    // Built-in data permutes every example it has: as many as asked about here.
    const std::uint64_t permuted = data.resident ? u(examples) : u(data.permuted);
    n.order =
        add(mul(u(steps(examples, batch, steps_field)), u(batch), 8, copies), mul(permuted, 8));
    n.step = add(mul(u(batch), example), mul(group, activation_floats(resolved), 4));
    return n;
  }
};

// The largest value in [1, above) for which `fits` holds, given that it fails at `above`; 0 when
// it fails at 1 too.
std::int64_t largest_fitting(std::int64_t above, const std::function<bool(std::int64_t)>& fits) {
  if (!fits(1)) return 0;
  std::int64_t lo = 1, hi = above;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

Error too_big(const std::string& field, std::int64_t most, std::int64_t got,
              const std::string& why) {
  return invalid_input(field + ": expected at most " + std::to_string(most) + " (" + why +
                       "), got " + std::to_string(got));
}

Status check_memory(const Sizing& s, std::int64_t steps, std::uint64_t memory) {
  const Task& task = s.task;
  const std::int64_t examples = s.data.examples;
  const std::string here = show_bytes(memory) + " of memory here";
  const Need full = s.need(examples, task.batch_size, task.steps_per_epoch);
  if (full.total() <= memory) return {};
  if (full.state > memory) {
    return invalid_input("model.options: expected a model whose state fits in " + here + ", got " +
                         std::to_string(zoo_parameter_count(s.resolved)) +
                         " parameters that need " + show_bytes(full.state) +
                         " with their gradients, optimizer state and a snapshot (" +
                         task.model.name + ": " + options_text(s.model) + ")");
  }
  const std::int64_t least_steps = task.steps_per_epoch > 0 ? 1 : 0;
  const Need one = s.need(examples, 1, least_steps);
  if (one.total() > memory) {
    if (add(one.data, one.order) > one.step && s.data.resident) {
      const std::string field = s.resolved.zoo_dataset().kind == DatasetKind::kSynthetic
                                    ? "dataset.options.samples"
                                    : "dataset.options.limit";
      // The most that fits at the task's batch, or failing that, at a batch of one.
      std::int64_t most = largest_fitting(examples, [&](std::int64_t n) {
        return s.need(n, task.batch_size, task.steps_per_epoch).total() <= memory;
      });
      if (most == 0) {
        most = largest_fitting(
            examples, [&](std::int64_t n) { return s.need(n, 1, least_steps).total() <= memory; });
      }
      return too_big(field, most, examples,
                     std::to_string(examples) + " examples held in memory need " +
                         show_bytes(add(one.data, one.order)) + ", " + here);
    }
    if (!s.data.resident && add(full.state, mul(u(s.data.permuted), 8)) > memory) {
      const std::uint64_t most = std::min<std::uint64_t>((memory - full.state) / 8, INT64_MAX);
      return invalid_input("dataset: expected at most " + std::to_string(most) +
                           " examples (every pass permutes all of them, 8 bytes each; " + here +
                           "), got " + std::to_string(s.data.permuted));
    }
    if (one.order > one.step) {  // memory-mapped data too large for one pass's order
      const std::int64_t most = largest_fitting(steps, [&](std::int64_t n) {
        return s.need(examples, task.batch_size, n).total() <= memory;
      });
      if (most > 0) {
        return too_big("steps_per_epoch", most, task.steps_per_epoch,
                       "0 takes a whole pass, and the order of " + std::to_string(examples) +
                           " examples needs " + show_bytes(one.order) + ", " + here);
      }
    }
    const std::uint64_t example = add(s.data.input_bytes, s.data.target_bytes);
    const bool model_heavy = mul(activation_floats(s.resolved), 4) > example;
    return invalid_input(std::string(model_heavy ? "model.options" : "dataset") +
                         ": expected one example to fit in " + here + ", got one that needs " +
                         show_bytes(one.step) + " for its inputs, targets and activations (" +
                         task.model.name + (s.model.empty() ? "" : ": " + options_text(s.model)) +
                         ")");
  }
  if (task.steps_per_epoch > 0 && s.need(examples, task.batch_size, 1).total() <= memory) {
    const std::int64_t most = largest_fitting(task.steps_per_epoch, [&](std::int64_t n) {
      return s.need(examples, task.batch_size, n).total() <= memory;
    });
    return too_big("steps_per_epoch", most, task.steps_per_epoch,
                   "an epoch's order of " + std::to_string(steps) + " steps x " +
                       std::to_string(task.batch_size) + " examples needs " +
                       show_bytes(full.order) + ", " + here);
  }
  const std::int64_t most = largest_fitting(task.batch_size, [&](std::int64_t b) {
    return s.need(examples, b, task.steps_per_epoch).total() <= memory;
  });
  return too_big("batch_size", most, task.batch_size,
                 "a step of " + std::to_string(task.batch_size) +
                     " examples and its epoch order need " +
                     show_bytes(add(full.step, full.order)) + ", " + here);
}

std::uint64_t digits(std::uint64_t n) {
  std::uint64_t d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

}  // namespace

DataShape synthetic_shape(const TrainingTask& resolved) {
  const ModelRow& m = resolved.zoo_model();
  const Options& model = resolved.model;
  // A user module's synthetic features are sized by the dataset's options, not the model's.
  const Options& sizes = m.user_module ? resolved.dataset : model;
  DataShape s;
  s.examples = s.permuted = resolved.dataset.at("samples");
  s.resident = true;
  s.target_bytes = 8;  // a class id
  switch (m.input) {
    case InputKind::kFeatures:
      s.input_bytes = mul(4, u(sizes.at("input_dim")));
      break;
    case InputKind::kImages:
      s.input_bytes = std::uint64_t{4} * 3 * 32 * 32;
      break;
    case InputKind::kVolumes: {
      const std::uint64_t n = u(model.at("size"));
      s.input_bytes = s.target_bytes = mul(4, n, n, n);
      break;
    }
    case InputKind::kTokens:
      s.input_bytes = s.target_bytes = mul(8, u(model.at("seq_len")));
      break;
  }
  return s;
}

std::int64_t steps_per_epoch(const Task& task, std::int64_t dataset_size) {
  if (task.steps_per_epoch > 0) return task.steps_per_epoch;
  return std::max<std::int64_t>(1, dataset_size / task.batch_size);
}

std::uint64_t saturating_product(std::span<const std::int64_t> factors, std::uint64_t scale) {
  std::uint64_t r = scale;
  for (std::int64_t f : factors) r = mul(r, u(f));
  return r;
}

std::uint64_t usable_memory() {
  std::uint64_t memory = mul(u(::sysconf(_SC_PHYS_PAGES)), u(::sysconf(_SC_PAGESIZE)));
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    memory = std::min<std::uint64_t>(memory, limit.rlim_cur);
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");
  std::uint64_t cap = 0;
  if (cgroup >> cap && cap > 0) memory = std::min(memory, cap);  // "max" reads as no number
  return memory;
}

std::uint64_t zoo_parameter_count(const TrainingTask& resolved) {
  const ModelRow& m = resolved.zoo_model();
  return m.parameters ? m.parameters(resolved.model) : 0;
}

StateCount zoo_state_count(const TrainingTask& resolved) {
  const ModelRow& m = resolved.zoo_model();
  const ModelTensors t = m.tensors ? m.tensors(resolved.model) : ModelTensors{};
  const std::uint64_t copies = 1 + optimizer_slots(resolved.task.optimizer);
  return {add(mul(t.parameter_tensors, copies), t.statistic_tensors),
          add(mul(zoo_parameter_count(resolved), copies), t.statistic_elements)};
}

bool counted_without_building(const std::string& model, const std::string& dataset) {
  const ModelRow* m = find_model(model);
  const DatasetRow* d = find_dataset(dataset);
  return m != nullptr && d != nullptr && !m->user_module && d->kind == DatasetKind::kSynthetic;
}

Result<StateCount> synthetic_zoo_state(const Task& task) {
  if (!counted_without_building(task.model.name, task.dataset.name)) {
    return internal_error("synthetic_zoo_state: model " + task.model.name + " on dataset " +
                          task.dataset.name + " is measured by building it");
  }
  VT_ASSIGN_OR_RETURN(const TrainingTask resolved, resolve_for_training(task));
  VT_RETURN_IF_ERROR(check_sizes(resolved, synthetic_shape(resolved), usable_memory()));
  return zoo_state_count(resolved);
}

Result<TaskSizes> check_sizes(const TrainingTask& resolved, const DataShape& data,
                              std::uint64_t memory) {
  const Task& task = resolved.task;
  // The arithmetic below needs the format's own rules (batch_size >= 1, gradient_groups >= 1).
  VT_RETURN_IF_ERROR(validate_task(task, "task"));
  if (task.intra_op_threads > kMaxIntraOpThreads) {
    return invalid_input("intra_op_threads: expected at most " +
                         std::to_string(kMaxIntraOpThreads) + ", got " +
                         std::to_string(task.intra_op_threads));
  }
  if (data.examples < 1) return invalid_input("dataset: holds no examples to train on");
  const Sizing sizing{resolved, task, resolved.model, data};
  TaskSizes out;
  out.steps = steps_per_epoch(task, data.examples);
  VT_RETURN_IF_ERROR(check_memory(sizing, out.steps, memory));
  out.memory = sizing.need(data.examples, task.batch_size, task.steps_per_epoch).total();
  out.total_steps = mul(u(out.steps), u(task.epochs));
  if (out.total_steps > kMaxTotalSteps) {
    return too_big("epochs", static_cast<std::int64_t>(kMaxTotalSteps / u(out.steps)), task.epochs,
                   "the learning-rate schedule counts the task's steps exactly up to 2^53, and an "
                   "epoch has " +
                       std::to_string(out.steps) + " steps");
  }
  return out;
}

Status check_local_ranks(const TrainingTask& task, std::int64_t ranks, const std::string& field,
                         std::uint64_t memory) {
  const std::uint64_t each = add(kRankProcessBytes, state_bytes(task));
  if (mul(u(ranks), each) <= memory) return {};
  return invalid_input(field + ": expected at most " + std::to_string(memory / each) +
                       " ranks on this machine (each is a process of at least " + show_bytes(each) +
                       ", LibTorch and the model's state; " + show_bytes(memory) +
                       " of memory here), got " + std::to_string(ranks) +
                       "; start fewer with --nproc, or spread them over machines with " +
                       "--world-size");
}

namespace {

// What one record of a task with this layout takes at most: the most one sampled value takes
// (its index in decimal, a comma, its bytes in hex) and what each fingerprint costs besides (its
// seed, and a name, dtype and numel per tensor, since every floating-point tensor is sampled).
struct RecordCost {
  std::uint64_t per_value = 0, per_fingerprint = 128, values = 0;

  explicit RecordCost(std::span<const TensorEntry> layout) {
    for (const TensorEntry& t : layout) {
      if (!is_floating(t.dtype) || t.numel() == 0) continue;
      per_value =
          std::max<std::uint64_t>(per_value, digits(t.numel() - 1) + 1 + 2 * dtype_size(t.dtype));
      per_fingerprint += 96 + nlohmann::json(t.name).dump().size() + digits(t.numel());
      values = add(values, t.numel());
    }
  }
  // Fingerprints, tracking fingerprint and trail, and 4 KiB for the record's other fields.
  std::uint64_t record(std::uint64_t k, std::uint64_t tracking, std::int64_t steps,
                       std::int64_t interval) const {
    const std::uint64_t trail = interval > 0 ? u(steps / interval) : 0;
    const std::uint64_t sampled = add(k, mul(tracking, add(1, trail)));
    return add(4096, add(mul(per_fingerprint, add(2, trail)), mul(per_value, sampled)));
  }
};

}  // namespace

std::uint64_t record_bytes_bound(const Task& task, std::int64_t steps,
                                 std::span<const TensorEntry> layout) {
  const RecordCost cost(layout);
  const FingerprintSpec& f = task.fingerprint;
  // The environment a record may carry: every field at its longest, each byte of its name and
  // value escaped at JSON's longest (\u00XX, 6 bytes), quoted and separated.
  const std::uint64_t environment = kMaxEnvironmentFields * (6 * (64 + kMaxEnvironmentValue) + 8);
  return std::min(kMaxRecordBytes,
                  add(environment, cost.record(u(f.k), u(f.tracking_k), steps, f.trail_interval)));
}

Status check_fingerprint_sizes(const Task& task, std::int64_t steps,
                               std::span<const TensorEntry> layout) {
  const RecordCost cost(layout);
  const std::uint64_t per_value = cost.per_value, values = cost.values;
  // plan_samples' own rules, in its words: more positions than values, fewer than one a tensor.
  // Past the values it refuses before it allocates; below, the record's bound comes first.
  auto plan = [&](const char* field, std::int64_t k) -> Status {
    auto planned = fp::plan_samples(Digest{}, layout, u(k));
    if (planned.ok()) return {};
    std::string why = planned.error().message;
    if (why.rfind("fingerprint: ", 0) == 0) why.erase(0, 13);
    return invalid_input(std::string(field) + ": " + why);
  };
  if (u(task.fingerprint.k) > values) return plan("fingerprint.k", task.fingerprint.k);
  if (u(task.fingerprint.tracking_k) > values)
    return plan("fingerprint.tracking_k", task.fingerprint.tracking_k);
  const FingerprintSpec& f = task.fingerprint;
  auto record = [&](std::uint64_t k, std::uint64_t tracking, std::int64_t interval) {
    return cost.record(k, tracking, steps, interval);
  };
  const std::uint64_t k = u(f.k), tracking = u(f.tracking_k);
  if (record(k, tracking, f.trail_interval) > kMaxRecordBytes) {
    auto fits = [&](std::uint64_t a, std::uint64_t b, std::int64_t i) {
      return record(a, b, i) <= kMaxRecordBytes;
    };
    const std::string why = "an epoch's record holds its fingerprints and trail in at most " +
                            show_bytes(kMaxRecordBytes) + ", " + std::to_string(per_value) +
                            " bytes per value";
    if (f.trail_interval > 0 && fits(k, tracking, 0)) {
      // Fewer trail points with every longer interval; past the epoch's steps there are none.
      std::int64_t fails = f.trail_interval;
      std::int64_t least = steps < std::numeric_limits<std::int64_t>::max() ? steps + 1 : steps;
      while (least - fails > 1) {
        const std::int64_t mid = fails + (least - fails) / 2;
        (fits(k, tracking, mid) ? least : fails) = mid;
      }
      return invalid_input("fingerprint.trail_interval: expected at least " +
                           std::to_string(least) + " for epochs of " + std::to_string(steps) +
                           " steps (" + why + "), got " + std::to_string(f.trail_interval));
    }
    const std::uint64_t trail = f.trail_interval > 0 ? u(steps / f.trail_interval) : 0;
    const bool k_heavy = k >= mul(tracking, add(1, trail));
    const std::string field = k_heavy ? "fingerprint.k" : "fingerprint.tracking_k";
    const std::int64_t got = k_heavy ? f.k : f.tracking_k;
    const std::int64_t most = largest_fitting(got, [&](std::int64_t n) {
      return k_heavy ? fits(u(n), tracking, f.trail_interval) : fits(k, u(n), f.trail_interval);
    });
    return invalid_input(field + ": expected at most " + std::to_string(most) + " (" + why +
                         "), got " + std::to_string(got));
  }
  VT_RETURN_IF_ERROR(plan("fingerprint.k", f.k));
  return plan("fingerprint.tracking_k", f.tracking_k);
}

}  // namespace vt::training
