// validate_task: the value rules of docs/task.md, applied to a Task however it was made.

#include <cmath>
#include <initializer_list>

#include <nlohmann/json.hpp>

#include "protocol/environment.h"
#include "protocol/task.h"

namespace vt {
namespace {

using nlohmann::json;

// Integral doubles print without ".0" so that a message quotes "-1" back for an input of -1.
std::string show(const json& value) {
  if (value.is_number_float()) {
    double d = value.get<double>();
    if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 1e15) {
      return std::to_string(static_cast<long long>(d));
    }
  }
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

class Checker {
 public:
  explicit Checker(std::string_view where) : where_(where) {}

  Error fail(std::string_view path, std::string_view expected, const json& got) const {
    return invalid_input(std::string(where_) + ": " + std::string(path) + ": expected " +
                         std::string(expected) + ", got " + show(got));
  }
  Error fail_text(std::string_view path, std::string_view text) const {
    return invalid_input(std::string(where_) + ": " + std::string(path) + ": " + std::string(text));
  }

  Status at_least(std::string_view path, std::int64_t v, std::int64_t min) const {
    if (v >= min) return {};
    return fail(path, "an integer >= " + std::to_string(min), v);
  }

  // [lo, hi] with either end open; hi = infinity for no upper bound.
  Status in_range(std::string_view path, double v, double lo, bool lo_open, double hi = INFINITY,
                  bool hi_open = false) const {
    bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
    if (ok) return {};
    std::string expected = "a number ";
    if (std::isinf(hi)) {
      expected += std::string(lo_open ? "> " : ">= ") + show(lo);
    } else {
      expected += "in " + std::string(lo_open ? "(" : "[") + show(lo) + ", " + show(hi) +
                  (hi_open ? ")" : "]");
    }
    return fail(path, expected, v);
  }

  Status one_of(std::string_view path, const std::string& v,
                std::initializer_list<std::string_view> allowed) const {
    std::string list;
    for (auto a : allowed) {
      if (a == v) return {};
      list += (list.empty() ? "\"" : ", \"") + std::string(a) + "\"";
    }
    return fail(path, "one of " + list, v);
  }

  // Names double as file and tensor-name parts in training/, so keep them plain.
  Status identifier(std::string_view path, const std::string& v) const {
    bool ok = !v.empty() && v.size() <= 64;
    for (char c : v) {
      ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.');
    }
    if (ok) return {};
    return fail(path, "a name of 1-64 letters, digits, '_', '-' or '.'", v);
  }

  // Lower case only: two spellings of one digest would give one task two ids.
  Status sha256_hex(std::string_view path, const std::string& v) const {
    bool ok = v.size() == 64;
    for (char c : v) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    if (ok) return {};
    return fail(path, "a SHA-256 as 64 lower-case hex digits", v);
  }

  Status text(std::string_view path, const std::string& v) const {
    try {
      (void)json(v).dump();
    } catch (const json::exception&) {
      return fail_text(path, "is not valid UTF-8");
    }
    if (v.find('\0') != std::string::npos) return fail_text(path, "contains a NUL character");
    return {};
  }

  // A field that does nothing for the chosen variant must keep its default: otherwise two
  // tasks that train identically would have different ids.
  template <typename T>
  Status unused(std::string_view path, const T& v, const T& default_value,
                std::string_view applies_to) const {
    if (v == default_value) return {};
    return fail_text(path, "only applies to " + std::string(applies_to) + "; leave it at " +
                               show(default_value) + " (got " + show(v) + ")");
  }

 private:
  std::string_view where_;
};

Status validate_model(const Checker& c, const ModelSpec& m) {
  VT_RETURN_IF_ERROR(c.identifier("model.name", m.name));
  for (const auto& [key, _] : m.options) VT_RETURN_IF_ERROR(c.identifier("model.options", key));
  VT_RETURN_IF_ERROR(c.text("model.path", m.path));
  if (m.torchscript()) {
    if (m.path.empty()) return c.fail_text("model.path", "required for model \"torchscript\"");
    return c.sha256_hex("model.sha256", m.sha256);
  }
  VT_RETURN_IF_ERROR(c.unused("model.path", m.path, std::string(), "model \"torchscript\""));
  return c.unused("model.sha256", m.sha256, std::string(), "model \"torchscript\"");
}

Status validate_dataset(const Checker& c, const DatasetSpec& d) {
  VT_RETURN_IF_ERROR(c.identifier("dataset.name", d.name));
  for (const auto& [key, _] : d.options) VT_RETURN_IF_ERROR(c.identifier("dataset.options", key));
  VT_RETURN_IF_ERROR(c.text("dataset.path", d.path));
  if (!d.path.empty() && d.files.empty()) {
    return c.fail_text("dataset.files", "must pin at least one file when dataset.path is set");
  }
  if (d.path.empty() && !d.files.empty()) {
    return c.fail_text("dataset.path", "required when dataset.files pins files");
  }
  for (const auto& [name, digest] : d.files) {
    std::string path = "dataset.files." + name;
    VT_RETURN_IF_ERROR(c.text(path, name));
    // Pinned files live directly in dataset.path: no way out of that folder.
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
      return c.fail_text(path, "a file name must be a plain name inside dataset.path");
    }
    VT_RETURN_IF_ERROR(c.sha256_hex(path, digest));
  }
  for (const auto& [name, digest] : d.eval_files) {
    std::string path = "dataset.eval_files." + name;
    VT_RETURN_IF_ERROR(c.text(path, name));
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
      return c.fail_text(path, "a file name must be a plain name inside dataset.path");
    }
    if (d.files.count(name) != 0)
      return c.fail_text(path, "is also a training file; held-out data must be other data");
    VT_RETURN_IF_ERROR(c.sha256_hex(path, digest));
  }
  if (!d.eval_files.empty() && d.path.empty())
    return c.fail_text("dataset.path", "required when dataset.eval_files pins files");
  VT_RETURN_IF_ERROR(c.in_range("dataset.eval_fraction", d.eval_fraction, 0, false, 1, true));
  if (d.eval_fraction != 0.0 && !d.eval_files.empty()) {
    return c.fail_text("dataset.eval_fraction", "set either eval_fraction or eval_files, not both");
  }
  // Whether the data are images the crop fits is known once the data are: training checks it.
  const AugmentSpec& a = d.augment;
  if (a.crop_padding < 0 || a.crop_padding > 256)
    return c.fail("dataset.augment.crop_padding", "an integer in [0, 256]", a.crop_padding);
  VT_RETURN_IF_ERROR(c.one_of("dataset.augment.padding_mode", a.padding_mode, {"zero", "reflect"}));
  if (a.crop_padding == 0)
    VT_RETURN_IF_ERROR(c.unused("dataset.augment.padding_mode", a.padding_mode, std::string("zero"),
                                "dataset.augment.crop_padding > 0"));
  return {};
}

// The recipe fields of the optimizer (docs/task.md, "Recipes").
Status validate_recipe(const Checker& c, const OptimizerSpec& o) {
  VT_RETURN_IF_ERROR(c.in_range("optimizer.clip_grad_norm", o.clip_grad_norm, 0, false));
  VT_RETURN_IF_ERROR(c.one_of("optimizer.clip_norm", o.clip_norm, {"l2", "inf"}));
  if (o.clip_grad_norm == 0.0)
    VT_RETURN_IF_ERROR(c.unused("optimizer.clip_norm", o.clip_norm, std::string("l2"),
                                "a task with optimizer.clip_grad_norm > 0"));
  VT_RETURN_IF_ERROR(c.in_range("optimizer.ema_decay", o.ema_decay, 0, false, 1, true));
  constexpr std::size_t kMaxNoDecay = 1 << 16;
  if (o.no_decay.size() > kMaxNoDecay)
    return c.fail("optimizer.no_decay", "at most 65536 parameter names",
                  static_cast<std::int64_t>(o.no_decay.size()));
  for (std::size_t i = 0; i < o.no_decay.size(); ++i) {
    const std::string path = "optimizer.no_decay[" + std::to_string(i) + "]";
    const std::string& name = o.no_decay[i];
    if (name.empty() || name.size() > 1024) return c.fail(path, "a parameter name", name);
    VT_RETURN_IF_ERROR(c.text(path, name));
    // Sorted and unique: one set of names, one spelling, one task_id.
    if (i > 0 && !(o.no_decay[i - 1] < name))
      return c.fail_text(path,
                         "names must be sorted and unique (after \"" + o.no_decay[i - 1] + "\")");
  }
  if (!o.no_decay.empty() && o.weight_decay == 0.0)
    return c.fail_text("optimizer.no_decay", "only applies with optimizer.weight_decay > 0");
  return {};
}

Status validate_optimizer(const Checker& c, const OptimizerSpec& o) {
  const OptimizerSpec defaults;
  VT_RETURN_IF_ERROR(c.one_of("optimizer.name", o.name, {"sgd", "adam", "adamw"}));
  VT_RETURN_IF_ERROR(c.in_range("optimizer.lr", o.lr, 0, true));
  VT_RETURN_IF_ERROR(c.in_range("optimizer.momentum", o.momentum, 0, false, 1, true));
  VT_RETURN_IF_ERROR(c.in_range("optimizer.weight_decay", o.weight_decay, 0, false));
  VT_RETURN_IF_ERROR(c.in_range("optimizer.beta1", o.beta1, 0, false, 1, true));
  VT_RETURN_IF_ERROR(c.in_range("optimizer.beta2", o.beta2, 0, false, 1, true));
  VT_RETURN_IF_ERROR(c.in_range("optimizer.eps", o.eps, 0, true));
  VT_RETURN_IF_ERROR(validate_recipe(c, o));
  if (o.name == "sgd") {
    if (o.nesterov && o.momentum == 0) {
      return c.fail_text("optimizer.nesterov", "requires optimizer.momentum > 0");
    }
    VT_RETURN_IF_ERROR(c.unused("optimizer.beta1", o.beta1, defaults.beta1, "adam and adamw"));
    VT_RETURN_IF_ERROR(c.unused("optimizer.beta2", o.beta2, defaults.beta2, "adam and adamw"));
    return c.unused("optimizer.eps", o.eps, defaults.eps, "adam and adamw");
  }
  VT_RETURN_IF_ERROR(c.unused("optimizer.momentum", o.momentum, defaults.momentum, "sgd"));
  return c.unused("optimizer.nesterov", o.nesterov, defaults.nesterov, "sgd");
}

Status validate_schedule(const Checker& c, const ScheduleSpec& s, double lr) {
  const ScheduleSpec defaults;
  VT_RETURN_IF_ERROR(c.one_of("schedule.name", s.name, {"constant", "step", "cosine"}));
  VT_RETURN_IF_ERROR(c.at_least("schedule.step_size", s.step_size, 1));
  VT_RETURN_IF_ERROR(c.in_range("schedule.gamma", s.gamma, 0, true));
  VT_RETURN_IF_ERROR(c.in_range("schedule.min_lr", s.min_lr, 0, false));
  VT_RETURN_IF_ERROR(c.at_least("schedule.warmup_steps", s.warmup_steps, 0));
  if (s.name != "step") {
    VT_RETURN_IF_ERROR(
        c.unused("schedule.step_size", s.step_size, defaults.step_size, "schedule \"step\""));
    VT_RETURN_IF_ERROR(c.unused("schedule.gamma", s.gamma, defaults.gamma, "schedule \"step\""));
  }
  if (s.name != "cosine") {
    return c.unused("schedule.min_lr", s.min_lr, defaults.min_lr, "schedule \"cosine\"");
  }
  if (s.min_lr > lr) {
    return c.fail("schedule.min_lr", "a number <= optimizer.lr (" + show(lr) + ")", s.min_lr);
  }
  return {};
}

bool power_of_two(std::int64_t n) { return n >= 1 && (n & (n - 1)) == 0; }

Status validate_groups(const Checker& c, const Task& t) {
  if (!power_of_two(t.gradient_groups) || t.gradient_groups > (std::int64_t{1} << 20)) {
    return c.fail("gradient_groups", "a power of two in [1, 2^20]", t.gradient_groups);
  }
  if (t.batch_size % t.gradient_groups != 0) {
    return c.fail("gradient_groups",
                  "a divisor of batch_size (" + std::to_string(t.batch_size) + ")",
                  t.gradient_groups);
  }
  if (!power_of_two(t.world_size) || t.world_size > t.gradient_groups) {
    return c.fail("world_size",
                  "a power of two <= gradient_groups (" + std::to_string(t.gradient_groups) + ")",
                  t.world_size);
  }
  return {};
}

}  // namespace

Status validate_task(const Task& t, std::string_view where) {
  Checker c(where);
  if (t.version != 1) {
    return c.fail("version", "1 (the only task format this build reads)", t.version);
  }
  VT_RETURN_IF_ERROR(validate_model(c, t.model));
  VT_RETURN_IF_ERROR(validate_dataset(c, t.dataset));
  VT_RETURN_IF_ERROR(c.one_of("loss", t.loss, {"cross_entropy", "mse", "model"}));
  VT_RETURN_IF_ERROR(c.in_range("loss_options.label_smoothing", t.loss_options.label_smoothing, 0,
                                false, 1, true));
  if (t.loss != "cross_entropy")
    VT_RETURN_IF_ERROR(c.unused("loss_options.label_smoothing", t.loss_options.label_smoothing, 0.0,
                                "loss cross_entropy"));
  VT_RETURN_IF_ERROR(validate_optimizer(c, t.optimizer));
  VT_RETURN_IF_ERROR(validate_schedule(c, t.schedule, t.optimizer.lr));
  VT_RETURN_IF_ERROR(c.at_least("epochs", t.epochs, 1));
  VT_RETURN_IF_ERROR(c.at_least("steps_per_epoch", t.steps_per_epoch, 0));
  VT_RETURN_IF_ERROR(c.at_least("batch_size", t.batch_size, 1));
  VT_RETURN_IF_ERROR(validate_groups(c, t));
  VT_RETURN_IF_ERROR(c.at_least("intra_op_threads", t.intra_op_threads, 1));
  VT_RETURN_IF_ERROR(c.at_least("portable_arithmetic", t.portable_arithmetic, 1));
  if (t.determinism != Determinism::kPortable) {
    VT_RETURN_IF_ERROR(c.unused("portable_arithmetic", t.portable_arithmetic, std::int64_t{1},
                                "determinism \"portable\""));
  }
  VT_RETURN_IF_ERROR(c.at_least("fingerprint.k", t.fingerprint.k, 1));
  VT_RETURN_IF_ERROR(c.at_least("fingerprint.tracking_k", t.fingerprint.tracking_k, 1));
  VT_RETURN_IF_ERROR(c.at_least("fingerprint.trail_interval", t.fingerprint.trail_interval, 0));
  VT_RETURN_IF_ERROR(c.in_range("tolerance.atol", t.tolerance.atol, 0, false));
  VT_RETURN_IF_ERROR(c.in_range("tolerance.rtol", t.tolerance.rtol, 0, false));
  VT_RETURN_IF_ERROR(c.in_range("tolerance.rel_l2", t.tolerance.rel_l2, 0, false));
  VT_RETURN_IF_ERROR(validate_environment_pin(t, where));
  return c.in_range("tolerance.max_outlier_fraction", t.tolerance.max_outlier_fraction, 0, false, 1,
                    false);
}

}  // namespace vt
