// Flags for the optimizer, schedule and loss fields of `task init`; the field listing of
// `task show` (cli/task_fields.h).
#include "cli/task_fields.h"

#include <nlohmann/json.hpp>

namespace vt::cli {
namespace {

void list_fields(const nlohmann::json& value, const std::string& path, std::string& out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& [key, child] : value.items()) {
      std::string inner = path;
      if (!inner.empty()) inner += '.';
      inner += key;
      list_fields(child, inner, out);
    }
    return;
  }
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  if (value.is_object()) text = "(none)";
  out += path;
  out.append(path.size() < 34 ? 34 - path.size() : 1, ' ');
  out += text;
  out += '\n';
}

}  // namespace

void add_hyper_options(CLI::App* init, HyperArgs& a) {
  init->add_option(
      "--loss", a.loss,
      "cross_entropy | mse | model (the module's forward(inputs, targets) is the loss)");
  init->add_option("--momentum", a.momentum, "sgd momentum (default 0.9 for sgd)");
  init->add_flag("--nesterov", a.nesterov, "sgd: Nesterov momentum");
  init->add_option("--weight-decay", a.weight_decay,
                   "L2 penalty (sgd, adam) or decoupled decay (adamw)");
  init->add_option("--beta1", a.beta1, "adam/adamw first-moment decay");
  init->add_option("--beta2", a.beta2, "adam/adamw second-moment decay");
  init->add_option("--eps", a.eps, "adam/adamw denominator epsilon");
  init->add_option("--warmup-steps", a.warmup_steps, "Linear warmup from 0 over this many steps");
  init->add_option("--min-lr", a.min_lr, "cosine schedule: final learning rate");
  init->add_option("--step-size", a.step_size, "step schedule: epochs between decays");
  init->add_option("--gamma", a.gamma, "step schedule: decay factor");
  init->add_option("--tracking-k", a.tracking_k, "Values in the tracking fingerprint");
  init->add_option("--clip-grad-norm", a.clip_grad_norm,
                   "Clip the global gradient norm to this before each update "
                   "(torch.nn.utils.clip_grad_norm_)");
  init->add_option("--clip-norm", a.clip_norm, "The norm --clip-grad-norm measures: l2 or inf");
  init->add_option("--no-decay", a.no_decay,
                   "Parameters spared weight decay: 1d (fewer than 2 dims), norm_and_bias, or "
                   "comma-separated name patterns; resolved from the model into the task");
  init->add_option("--label-smoothing", a.label_smoothing,
                   "cross_entropy's label smoothing, in [0, 1)");
  init->add_option("--crop-padding", a.crop_padding,
                   "Augment images: a random crop of the image's size from it padded by this "
                   "(RandomCrop(size, padding))");
  init->add_option("--padding-mode", a.padding_mode, "--crop-padding's fill: zero or reflect");
  init->add_flag("--flip", a.flip, "Augment images: a random horizontal flip (p = 0.5)");
  init->add_option("--ema-decay", a.ema_decay,
                   "Keep an exponential moving average of the weights with this decay, in [0, 1) "
                   "(0.999 in most recipes); held-out metrics and export use it");
}

void apply_hyper_args(const HyperArgs& a, Task& t) {
  if (!a.loss.empty()) t.loss = a.loss;
  if (!std::isnan(a.momentum)) t.optimizer.momentum = a.momentum;
  if (a.nesterov) t.optimizer.nesterov = true;
  if (!std::isnan(a.weight_decay)) t.optimizer.weight_decay = a.weight_decay;
  if (!std::isnan(a.beta1)) t.optimizer.beta1 = a.beta1;
  if (!std::isnan(a.beta2)) t.optimizer.beta2 = a.beta2;
  if (!std::isnan(a.eps)) t.optimizer.eps = a.eps;
  if (a.warmup_steps >= 0) t.schedule.warmup_steps = a.warmup_steps;
  if (!std::isnan(a.min_lr)) t.schedule.min_lr = a.min_lr;
  if (a.step_size >= 0) t.schedule.step_size = a.step_size;
  if (!std::isnan(a.gamma)) t.schedule.gamma = a.gamma;
  if (a.tracking_k >= 0) t.fingerprint.tracking_k = a.tracking_k;
  if (!std::isnan(a.clip_grad_norm)) t.optimizer.clip_grad_norm = a.clip_grad_norm;
  if (!a.clip_norm.empty()) t.optimizer.clip_norm = a.clip_norm;
  if (!std::isnan(a.label_smoothing)) t.loss_options.label_smoothing = a.label_smoothing;
  if (a.crop_padding >= 0) t.dataset.augment.crop_padding = a.crop_padding;
  if (!a.padding_mode.empty()) t.dataset.augment.padding_mode = a.padding_mode;
  if (a.flip) t.dataset.augment.flip = true;
  if (!std::isnan(a.ema_decay)) t.optimizer.ema_decay = a.ema_decay;
}

std::string describe_task(const Task& task) {
  std::string out;
  list_fields(nlohmann::json::parse(canonical_task_json(task)), "", out);
  return out;
}

}  // namespace vt::cli
