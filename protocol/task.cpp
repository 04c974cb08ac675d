#include "protocol/task.h"

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "common/file_io.h"
#include "common/json.h"
#include "common/json_fields.h"
#include "common/sha256.h"

namespace vt {
namespace {

using nlohmann::json;

// A field spelt as one of an enumeration's names (EnumNames); absent, `out` keeps its default.
template <class Enum>
Status read_choice(const JsonFields& fields, std::string_view key, Enum& out) {
  std::string text = name_string(out);
  VT_RETURN_IF_ERROR(fields.string(key, text));
  std::optional<Enum> value = enum_named<Enum>(text);
  if (!value) return fields.wrong(key, "one of " + quoted_names<Enum>(), json(text));
  out = *value;
  return {};
}

// nlohmann keeps the last of two equal keys; {"lr": 0.1, "lr": 10} would then mean something
// other than what a reader of the file sees, so duplicates are refused while parsing.
Result<json> parse_without_duplicates(std::string_view text, std::string_view where) {
  std::vector<std::set<std::string>> seen;
  std::vector<std::string> keys;
  std::string duplicate;
  auto callback = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      seen.emplace_back();
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      seen.pop_back();
      keys.pop_back();
    } else if (event == json::parse_event_t::key) {
      keys.back() = parsed.get<std::string>();
      if (!seen.back().insert(keys.back()).second && duplicate.empty()) {
        for (const auto& k : keys) duplicate += (duplicate.empty() ? "" : ".") + k;
      }
    }
    return true;
  };
  VT_ASSIGN_OR_RETURN(json value, parse_json_bounded(text, where, kMaxJsonDepth, callback));
  if (!duplicate.empty()) {
    return invalid_input(std::string(where) + ": " + duplicate + ": field appears twice");
  }
  return value;
}

Status read_task(const JsonFields& root, Task& t) {
  VT_RETURN_IF_ERROR(root.known_keys({"batch_size",
                                      "dataset",
                                      "determinism",
                                      "device",
                                      "environments",
                                      "epochs",
                                      "fingerprint",
                                      "gradient_groups",
                                      "intra_op_threads",
                                      "loss",
                                      "loss_options",
                                      "model",
                                      "optimizer",
                                      "portable_arithmetic",
                                      "precision",
                                      "schedule",
                                      "seed",
                                      "steps_per_epoch",
                                      "tolerance",
                                      "version",
                                      "world_size"}));
  VT_RETURN_IF_ERROR(root.integer("version", t.version));

  VT_ASSIGN_OR_RETURN(JsonFields model, root.child("model", true));
  VT_RETURN_IF_ERROR(model.known_keys({"name", "options", "path", "sha256"}));
  VT_RETURN_IF_ERROR(model.string("name", t.model.name, true));
  VT_RETURN_IF_ERROR(model.integer_map("options", t.model.options));
  VT_RETURN_IF_ERROR(model.string("path", t.model.path));
  VT_RETURN_IF_ERROR(model.string("sha256", t.model.sha256));

  VT_ASSIGN_OR_RETURN(JsonFields data, root.child("dataset", true));
  VT_RETURN_IF_ERROR(data.known_keys(
      {"augment", "eval_files", "eval_fraction", "files", "name", "options", "path"}));
  VT_RETURN_IF_ERROR(data.string("name", t.dataset.name, true));
  VT_RETURN_IF_ERROR(data.integer_map("options", t.dataset.options));
  VT_RETURN_IF_ERROR(data.string("path", t.dataset.path));
  VT_RETURN_IF_ERROR(data.string_map("files", t.dataset.files));
  VT_RETURN_IF_ERROR(data.string_map("eval_files", t.dataset.eval_files));
  VT_RETURN_IF_ERROR(data.number("eval_fraction", t.dataset.eval_fraction));
  VT_ASSIGN_OR_RETURN(JsonFields augment, data.child("augment", false));
  VT_RETURN_IF_ERROR(augment.known_keys({"crop_padding", "flip", "padding_mode"}));
  VT_RETURN_IF_ERROR(augment.integer("crop_padding", t.dataset.augment.crop_padding));
  VT_RETURN_IF_ERROR(augment.string("padding_mode", t.dataset.augment.padding_mode));
  VT_RETURN_IF_ERROR(augment.boolean("flip", t.dataset.augment.flip));

  VT_RETURN_IF_ERROR(root.string("loss", t.loss));
  VT_ASSIGN_OR_RETURN(JsonFields loss_options, root.child("loss_options", false));
  VT_RETURN_IF_ERROR(loss_options.known_keys({"label_smoothing"}));
  VT_RETURN_IF_ERROR(loss_options.number("label_smoothing", t.loss_options.label_smoothing));

  VT_ASSIGN_OR_RETURN(JsonFields opt, root.child("optimizer", false));
  VT_RETURN_IF_ERROR(
      opt.known_keys({"beta1", "beta2", "clip_grad_norm", "clip_norm", "ema_decay", "eps", "lr",
                      "momentum", "name", "nesterov", "no_decay", "weight_decay"}));
  VT_RETURN_IF_ERROR(opt.string("name", t.optimizer.name));
  VT_RETURN_IF_ERROR(opt.number("lr", t.optimizer.lr));
  VT_RETURN_IF_ERROR(opt.number("momentum", t.optimizer.momentum));
  VT_RETURN_IF_ERROR(opt.boolean("nesterov", t.optimizer.nesterov));
  VT_RETURN_IF_ERROR(opt.number("weight_decay", t.optimizer.weight_decay));
  VT_RETURN_IF_ERROR(opt.number("beta1", t.optimizer.beta1));
  VT_RETURN_IF_ERROR(opt.number("beta2", t.optimizer.beta2));
  VT_RETURN_IF_ERROR(opt.number("eps", t.optimizer.eps));
  VT_RETURN_IF_ERROR(opt.number("clip_grad_norm", t.optimizer.clip_grad_norm));
  VT_RETURN_IF_ERROR(opt.string("clip_norm", t.optimizer.clip_norm));
  VT_RETURN_IF_ERROR(opt.strings("no_decay", t.optimizer.no_decay));
  VT_RETURN_IF_ERROR(opt.number("ema_decay", t.optimizer.ema_decay));

  VT_ASSIGN_OR_RETURN(JsonFields sched, root.child("schedule", false));
  VT_RETURN_IF_ERROR(sched.known_keys({"gamma", "min_lr", "name", "step_size", "warmup_steps"}));
  VT_RETURN_IF_ERROR(sched.string("name", t.schedule.name));
  VT_RETURN_IF_ERROR(sched.integer("step_size", t.schedule.step_size));
  VT_RETURN_IF_ERROR(sched.number("gamma", t.schedule.gamma));
  VT_RETURN_IF_ERROR(sched.number("min_lr", t.schedule.min_lr));
  VT_RETURN_IF_ERROR(sched.integer("warmup_steps", t.schedule.warmup_steps));

  VT_RETURN_IF_ERROR(root.integer("epochs", t.epochs, true));
  VT_RETURN_IF_ERROR(root.integer("steps_per_epoch", t.steps_per_epoch));
  VT_RETURN_IF_ERROR(root.integer("batch_size", t.batch_size, true));
  VT_RETURN_IF_ERROR(root.integer("gradient_groups", t.gradient_groups));
  VT_RETURN_IF_ERROR(root.integer("world_size", t.world_size));
  VT_RETURN_IF_ERROR(root.unsigned64("seed", t.seed));
  VT_RETURN_IF_ERROR(root.integer("intra_op_threads", t.intra_op_threads));
  VT_RETURN_IF_ERROR(read_choice(root, "device", t.device));
  VT_RETURN_IF_ERROR(read_choice(root, "determinism", t.determinism));
  VT_RETURN_IF_ERROR(root.integer("portable_arithmetic", t.portable_arithmetic));
  VT_RETURN_IF_ERROR(read_choice(root, "precision", t.precision));

  VT_ASSIGN_OR_RETURN(JsonFields fp, root.child("fingerprint", false));
  VT_RETURN_IF_ERROR(fp.known_keys({"k", "tracking_k", "trail_interval"}));
  VT_RETURN_IF_ERROR(fp.integer("k", t.fingerprint.k));
  VT_RETURN_IF_ERROR(fp.integer("tracking_k", t.fingerprint.tracking_k));
  VT_RETURN_IF_ERROR(fp.integer("trail_interval", t.fingerprint.trail_interval));

  VT_ASSIGN_OR_RETURN(JsonFields tol, root.child("tolerance", false));
  VT_RETURN_IF_ERROR(tol.known_keys({"atol", "max_outlier_fraction", "rel_l2", "rtol"}));
  VT_RETURN_IF_ERROR(tol.number("atol", t.tolerance.atol));
  VT_RETURN_IF_ERROR(tol.number("rtol", t.tolerance.rtol));
  VT_RETURN_IF_ERROR(tol.number("rel_l2", t.tolerance.rel_l2));
  VT_RETURN_IF_ERROR(tol.number("max_outlier_fraction", t.tolerance.max_outlier_fraction));
  VT_RETURN_IF_ERROR(root.string_lists("environments", t.environments));
  return {};
}

json options_json(const Options& options) {
  json out = json::object();
  for (const auto& [k, v] : options) out[k] = v;
  return out;
}

json task_json(const Task& t) {
  json j = json::object();
  j["version"] = t.version;
  j["model"] = json::object();
  j["model"]["name"] = t.model.name;
  j["model"]["options"] = options_json(t.model.options);
  j["model"]["path"] = t.model.path;
  j["model"]["sha256"] = t.model.sha256;
  j["dataset"] = json::object();
  j["dataset"]["name"] = t.dataset.name;
  j["dataset"]["options"] = options_json(t.dataset.options);
  j["dataset"]["path"] = t.dataset.path;
  j["dataset"]["files"] = json::object();
  for (const auto& [name, digest] : t.dataset.files) j["dataset"]["files"][name] = digest;
  // Only when set: every task written before the eval split existed keeps its task_id.
  for (const auto& [name, digest] : t.dataset.eval_files) j["dataset"]["eval_files"][name] = digest;
  if (t.dataset.eval_fraction != 0.0) j["dataset"]["eval_fraction"] = t.dataset.eval_fraction;
  if (const AugmentSpec& a = t.dataset.augment; a.any()) {
    auto& out = j["dataset"]["augment"] = json::object();
    if (a.crop_padding > 0) out["crop_padding"] = a.crop_padding;
    if (a.padding_mode != "zero") out["padding_mode"] = a.padding_mode;
    if (a.flip) out["flip"] = true;
  }
  j["loss"] = t.loss;
  if (t.loss_options.label_smoothing != 0.0)
    j["loss_options"]["label_smoothing"] = t.loss_options.label_smoothing;
  auto& o = j["optimizer"] = json::object();
  o["name"] = t.optimizer.name;
  o["lr"] = t.optimizer.lr;
  o["momentum"] = t.optimizer.momentum;
  o["nesterov"] = t.optimizer.nesterov;
  o["weight_decay"] = t.optimizer.weight_decay;
  o["beta1"] = t.optimizer.beta1;
  o["beta2"] = t.optimizer.beta2;
  o["eps"] = t.optimizer.eps;
  // The recipe fields only when set: every task written before them keeps its task_id.
  if (t.optimizer.clip_grad_norm != 0.0) o["clip_grad_norm"] = t.optimizer.clip_grad_norm;
  if (t.optimizer.clip_norm != "l2") o["clip_norm"] = t.optimizer.clip_norm;
  if (!t.optimizer.no_decay.empty()) o["no_decay"] = t.optimizer.no_decay;
  if (t.optimizer.ema_decay != 0.0) o["ema_decay"] = t.optimizer.ema_decay;
  auto& s = j["schedule"] = json::object();
  s["name"] = t.schedule.name;
  s["step_size"] = t.schedule.step_size;
  s["gamma"] = t.schedule.gamma;
  s["min_lr"] = t.schedule.min_lr;
  s["warmup_steps"] = t.schedule.warmup_steps;
  j["epochs"] = t.epochs;
  j["steps_per_epoch"] = t.steps_per_epoch;
  j["batch_size"] = t.batch_size;
  // Absent at its default so that every task written before groups existed keeps its task_id.
  if (t.gradient_groups != 1) j["gradient_groups"] = t.gradient_groups;
  j["seed"] = t.seed;
  j["intra_op_threads"] = t.intra_op_threads;
  j["device"] = name_of(t.device);
  j["determinism"] = name_of(t.determinism);
  if (t.portable_arithmetic != 1) j["portable_arithmetic"] = t.portable_arithmetic;
  j["precision"] = name_of(t.precision);
  auto& f = j["fingerprint"] = json::object();
  f["k"] = t.fingerprint.k;
  f["tracking_k"] = t.fingerprint.tracking_k;
  f["trail_interval"] = t.fingerprint.trail_interval;
  auto& tol = j["tolerance"] = json::object();
  tol["atol"] = t.tolerance.atol;
  tol["rtol"] = t.tolerance.rtol;
  tol["rel_l2"] = t.tolerance.rel_l2;
  tol["max_outlier_fraction"] = t.tolerance.max_outlier_fraction;
  // Only when set: every task written before pins existed keeps its task_id.
  for (const auto& [field, values] : t.environments) j["environments"][field] = values;
  return j;
}

}  // namespace

Result<Task> parse_task(std::string_view json_text, std::string_view where) {
  VT_ASSIGN_OR_RETURN(json value, parse_without_duplicates(json_text, where));
  if (!value.is_object()) {
    return invalid_input(std::string(where) + ": expected a JSON object, got " +
                         (value.is_array() ? std::string("an array") : json_excerpt(value)));
  }
  Task task;
  VT_RETURN_IF_ERROR(read_task(JsonFields(value, std::string(where), "", "the task"), task));
  VT_RETURN_IF_ERROR(validate_task(task, where));
  return task;
}

Result<Task> load_task(const std::string& path) {
  VT_RETURN_IF_ERROR(check_input_file(path, "task file"));
  VT_ASSIGN_OR_RETURN(std::string text, read_text_file(path, std::uint64_t{1} << 20));
  return parse_task(text, path);
}

// A task that failed validate_task may hold invalid UTF-8; replacing it keeps this total
// (no exception leaves the module) and such a task is never accepted anywhere anyway.
std::string canonical_task_json(const Task& task) {
  return task_json(task).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string pretty_task_json(const Task& task) {
  json j = task_json(task);
  // Not in the canonical form: how many ranks train changes no bit of what they compute.
  if (task.world_size != 1) j["world_size"] = task.world_size;
  // Shown to people even at 1, the version every portable task had before versions existed.
  if (task.determinism == Determinism::kPortable)
    j["portable_arithmetic"] = task.portable_arithmetic;
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

Digest task_id(const Task& task) { return sha256(canonical_task_json(task)); }

}  // namespace vt
