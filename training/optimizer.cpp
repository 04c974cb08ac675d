#include "training/internal/optimizer.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "kernels/clip.h"
#include "kernels/optim.h"
#include "training/zoo/schedule.h"

namespace vt::training {

Status check_no_decay(const OptimizerSpec& spec, const NamedTensors& params) {
  std::set<std::string> names;
  for (const auto& [name, p] : params) names.insert(name);
  for (const std::string& n : spec.no_decay) {
    if (names.count(n)) continue;
    std::string some;
    for (const std::string& known : names) {
      if (some.size() > 200) {
        some += ", ...";
        break;
      }
      some += some.empty() ? "" : ", ";
      some += known;
    }
    return invalid_input("optimizer.no_decay: \"" + n +
                         "\" is not a parameter of the model (its parameters: " + some + ")");
  }
  return {};
}

Optimizer::Optimizer(const OptimizerSpec& spec, const NamedTensors& params, bool portable)
    : spec_(spec), portable_(portable) {
  const std::set<std::string> no_decay(spec.no_decay.begin(), spec.no_decay.end());
  for (const auto& [name, p] : params) {
    Slot s{name, p, {}, {}, {}, at::zeros({}, at::TensorOptions().dtype(at::kLong))};
    s.decay = no_decay.count(name) == 0;
    if (spec.name == "sgd" && spec.momentum != 0.0) s.momentum = at::zeros_like(p);
    if (spec.name == "adam" || spec.name == "adamw") {
      s.exp_avg = at::zeros_like(p);
      s.exp_avg_sq = at::zeros_like(p);
    }
    slots_.push_back(std::move(s));
  }
}

void Optimizer::zero_grad() {
  for (Slot& s : slots_) {
    if (!s.param.grad().defined()) continue;
    // Portable: no gradient at all, so that autograd stores the next one as its operator computed
    // it; adding it to a zero would turn a −0 into +0 (docs/portable.md, "Gradients").
    if (portable_) {
      s.param.mutable_grad() = at::Tensor();
    } else {
      s.param.mutable_grad().zero_();
    }
  }
}

void Optimizer::step(double lr) {
  c10::NoGradGuard no_grad;
  if (portable_) {
    if (spec_.clip_grad_norm > 0.0) portable_clip_gradients();
    portable_step(lr);
    return;
  }
  if (spec_.clip_grad_norm > 0.0) clip_gradients();
  const OptimizerSpec& o = spec_;
  for (Slot& s : slots_) {
    at::Tensor grad = s.param.grad();
    if (!grad.defined()) continue;  // a parameter the loss does not reach
    const std::int64_t step = next_step(s);
    const double wd = weight_decay(s);
    if (o.name == "sgd") {
      at::Tensor d = wd != 0.0 ? grad.add(s.param, wd) : grad;
      if (o.momentum != 0.0) {
        // PyTorch starts the buffer at the first gradient rather than decaying zeros into it.
        if (step == 1) {
          s.momentum.copy_(d);
        } else {
          s.momentum.mul_(o.momentum).add_(d);
        }
        d = o.nesterov ? d.add(s.momentum, o.momentum) : s.momentum;
      }
      s.param.add_(d, -lr);
      continue;
    }
    if (o.name == "adamw") {
      s.param.mul_(1.0 - lr * wd);
    } else if (wd != 0.0) {
      grad = grad.add(s.param, wd);
    }
    s.exp_avg.lerp_(grad, 1.0 - o.beta1);
    s.exp_avg_sq.mul_(o.beta2).addcmul_(grad, grad, 1.0 - o.beta2);
    const double bias1 = 1.0 - power(o.beta1, step);
    const double bias2_sqrt = std::sqrt(1.0 - power(o.beta2, step));  // sqrt is exact IEEE
    at::Tensor denom = (s.exp_avg_sq.sqrt() / bias2_sqrt).add_(o.eps);
    s.param.addcdiv_(s.exp_avg, denom, -lr / bias1);
  }
}

// As torch.nn.utils.clip_grad_norm_ (PyTorch 1.13) computes it, operation for operation, over
// the gradients in the parameters' order, so that a PyTorch loop reaches the same bits:
// total = norm(stack(norm(g) for g)), coef = reciprocal(total + 1e-6) * max_norm (Python's
// `max_norm / total`), clamped to at most 1, every gradient multiplied by it.
void Optimizer::clip_gradients() {
  std::vector<at::Tensor> grads;
  for (Slot& s : slots_) {
    if (s.param.grad().defined()) grads.push_back(s.param.grad());
  }
  if (grads.empty()) return;
  const at::Device device = grads.front().device();
  std::vector<at::Tensor> norms;
  at::Tensor total;
  if (spec_.clip_norm == "inf") {
    for (const at::Tensor& g : grads) norms.push_back(g.detach().abs().max().to(device));
    total = norms.size() == 1 ? norms.front() : at::max(at::stack(norms));
  } else {
    for (const at::Tensor& g : grads) {
      std::vector<std::int64_t> dims(static_cast<std::size_t>(g.dim()));
      std::iota(dims.begin(), dims.end(), 0);
      norms.push_back(at::norm(g.detach(), at::Scalar(2.0), dims, false).to(device));
    }
    total = at::norm(at::stack(norms), at::Scalar(2.0), std::vector<std::int64_t>{0}, false);
  }
  const at::Tensor coef = at::reciprocal(total + 1e-6) * spec_.clip_grad_norm;
  const at::Tensor clamped = at::clamp(coef, c10::nullopt, 1.0);
  for (at::Tensor& g : grads) g.detach().mul_(clamped.to(g.device()));
}

// docs/portable.md, "Gradient clipping": each gradient's part (sum of squares, or largest
// magnitude) with the tensors in canonical order (by name, as a snapshot lists them), one
// coefficient, then every gradient scaled by it in place.
void Optimizer::portable_clip_gradients() {
  std::vector<Slot*> order;
  for (Slot& s : slots_) {
    if (s.param.grad().defined()) order.push_back(&s);
  }
  if (order.empty()) return;
  std::sort(order.begin(), order.end(),
            [](const Slot* a, const Slot* b) { return a->name < b->name; });
  const bool inf = spec_.clip_norm == "inf";
  std::vector<float> parts;
  parts.reserve(order.size());
  for (Slot* s : order) {
    at::Tensor& grad = s->param.mutable_grad();
    if (!grad.is_contiguous()) grad = grad.contiguous();
    TORCH_CHECK(grad.scalar_type() == at::kFloat, "portable clipping: ", s->name,
                "'s gradient is not float32");
    parts.push_back(inf ? kernels::abs_max(grad.numel(), grad.data_ptr<float>())
                        : kernels::sum_of_squares(grad.numel(), grad.data_ptr<float>()));
  }
  const float c = kernels::clip_coefficient(static_cast<std::int64_t>(parts.size()), parts.data(),
                                            static_cast<float>(spec_.clip_grad_norm), inf);
  for (Slot* s : order) {
    at::Tensor& grad = s->param.mutable_grad();
    kernels::scale_gradient(grad.numel(), grad.data_ptr<float>(), c);
  }
}

std::int64_t Optimizer::next_step(Slot& s) {
  const std::int64_t step = s.step.item<std::int64_t>() + 1;
  s.step.fill_(step);
  return step;
}

void Optimizer::portable_step(double lr) {
  const bool sgd = spec_.name == "sgd";
  std::vector<at::Tensor> grads;  // contiguous gradients, alive until their update ran
  grads.reserve(slots_.size());
  // The tensors go in runs of one step count (all of them, unless a step missed some
  // parameter), each run one pass over its elements; a run keeps the parameters' order, which is
  // the order the trace records them in.
  // A run also shares whether weight decay applies (optimizer.no_decay).
  std::vector<kernels::SgdTensor> sgd_run;
  std::vector<kernels::AdamTensor> adam_run;
  std::int64_t run_step = 0;
  bool run_decay = true;
  const auto flush = [&] {
    if (!sgd_run.empty()) kernels::sgd_update(sgd_run, sgd_scalars(run_step, lr, run_decay));
    if (!adam_run.empty()) kernels::adam_update(adam_run, adam_scalars(run_step, lr, run_decay));
    sgd_run.clear();
    adam_run.clear();
  };
  for (Slot& s : slots_) {
    if (!s.param.grad().defined()) continue;  // a parameter the loss does not reach
    TORCH_CHECK(s.param.is_contiguous() && s.param.scalar_type() == at::kFloat,
                "portable optimizer: ", s.name, " is not a contiguous float32 tensor");
    const std::int64_t step = next_step(s);
    const at::Tensor& grad = grads.emplace_back(s.param.grad().contiguous());
    if (step != run_step || s.decay != run_decay) flush();
    run_step = step;
    run_decay = s.decay;
    float* param = s.param.data_ptr<float>();
    const float* g = grad.data_ptr<float>();
    if (sgd) {
      sgd_run.push_back({s.param.numel(), param, g,
                         s.momentum.defined() ? s.momentum.data_ptr<float>() : nullptr});
    } else {
      adam_run.push_back(
          {s.param.numel(), param, g, s.exp_avg.data_ptr<float>(), s.exp_avg_sq.data_ptr<float>()});
    }
  }
  flush();
}

// The step's scalars in binary64 and each rounded once to binary32 (docs/portable.md,
// "Optimizers").
kernels::SgdStep Optimizer::sgd_scalars(std::int64_t step, double lr, bool decay) const {
  kernels::SgdStep k;
  k.lr = static_cast<float>(lr);
  k.momentum = static_cast<float>(spec_.momentum);
  k.weight_decay = decay ? static_cast<float>(spec_.weight_decay) : 0.0f;
  k.nesterov = spec_.nesterov;
  k.first = step == 1;
  return k;
}

// The step's scalars in binary64 (IEEE operations only: power() multiplies, sqrt is exact) and
// each rounded once to binary32 (docs/portable.md, "Optimizers").
kernels::AdamStep Optimizer::adam_scalars(std::int64_t step, double lr, bool decay) const {
  const OptimizerSpec& o = spec_;
  kernels::AdamStep k;
  k.lr = static_cast<float>(lr);
  k.lr_over_bias1 = static_cast<float>(lr / (1.0 - power(o.beta1, step)));
  k.bias2_sqrt = static_cast<float>(std::sqrt(1.0 - power(o.beta2, step)));
  k.weight_decay = decay ? static_cast<float>(o.weight_decay) : 0.0f;
  k.beta1 = static_cast<float>(o.beta1);
  k.beta2 = static_cast<float>(o.beta2);
  k.eps = static_cast<float>(o.eps);
  k.decoupled = o.name == "adamw";
  return k;
}

NamedTensors Optimizer::state() const {
  NamedTensors out;
  for (const Slot& s : slots_) {
    const std::string prefix = "optim/" + s.name + "/";
    if (s.momentum.defined()) out.emplace_back(prefix + "momentum_buffer", s.momentum);
    if (s.exp_avg.defined()) out.emplace_back(prefix + "exp_avg", s.exp_avg);
    if (s.exp_avg_sq.defined()) out.emplace_back(prefix + "exp_avg_sq", s.exp_avg_sq);
    out.emplace_back(prefix + "step", s.step);
  }
  return out;
}

WeightAverage::WeightAverage(double decay, const NamedTensors& live, bool portable)
    : decay_(static_cast<float>(decay)),
      one_minus_decay_(static_cast<float>(1.0 - decay)),
      decay64_(decay),
      portable_(portable) {
  c10::NoGradGuard no_grad;
  for (const auto& [name, t] : live) {
    if (!at::isFloatingType(t.scalar_type())) continue;
    pairs_.push_back({name, t, t.detach().clone()});
  }
}

void WeightAverage::update() {
  c10::NoGradGuard no_grad;
  std::vector<kernels::EmaTensor> run;
  for (Pair& p : pairs_) {
    if (portable_ && p.live.scalar_type() == at::kFloat && p.live.is_contiguous()) {
      run.push_back({p.live.numel(), p.average.data_ptr<float>(), p.live.data_ptr<float>()});
      continue;
    }
    // PyTorch's `avg * decay + param * (1 - decay)`: three roundings, each scalar rounded to the
    // tensor's type, the same bits as the kernel's (element-wise, so on any CPU too).
    p.average.mul_(decay64_).add_(p.live.detach().mul(1.0 - decay64_));
  }
  if (!run.empty()) kernels::ema_update(run, decay_, one_minus_decay_);
}

void WeightAverage::swap() {
  c10::NoGradGuard no_grad;
  for (Pair& p : pairs_) {
    at::Tensor held = p.live.detach().clone();
    p.live.detach().copy_(p.average);
    p.average.copy_(held);
  }
}

NamedTensors WeightAverage::state() const {
  NamedTensors out;
  out.reserve(pairs_.size());
  for (const Pair& p : pairs_) out.emplace_back("ema/" + p.name, p.average);
  return out;
}

at::Tensor WeightAverage::average_of(const std::string& name) const {
  for (const Pair& p : pairs_)
    if (p.name == name) return p.average;
  return {};
}

}  // namespace vt::training
