#include "training/internal/optimizer.h"

#include <c10/core/GradMode.h>

#include <cmath>
#include <vector>

#include "kernels/optim.h"
#include "training/zoo/schedule.h"

namespace vt::training {

Optimizer::Optimizer(const OptimizerSpec& spec, const NamedTensors& params, bool portable)
    : spec_(spec), portable_(portable) {
  for (const auto& [name, p] : params) {
    Slot s{name, p, {}, {}, {}, at::zeros({}, at::TensorOptions().dtype(at::kLong))};
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
    portable_step(lr);
    return;
  }
  const OptimizerSpec& o = spec_;
  for (Slot& s : slots_) {
    at::Tensor grad = s.param.grad();
    if (!grad.defined()) continue;  // a parameter the loss does not reach
    const std::int64_t step = next_step(s);
    if (o.name == "sgd") {
      at::Tensor d = o.weight_decay != 0.0 ? grad.add(s.param, o.weight_decay) : grad;
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
      s.param.mul_(1.0 - lr * o.weight_decay);
    } else if (o.weight_decay != 0.0) {
      grad = grad.add(s.param, o.weight_decay);
    }
    s.exp_avg.lerp_(grad, 1.0 - o.beta1);
    s.exp_avg_sq.mul_(o.beta2).addcmul_(grad, grad, 1.0 - o.beta2);
    const double bias1 = 1.0 - power(o.beta1, step);
    const double bias2_sqrt = std::sqrt(1.0 - power(o.beta2, step));  // sqrt is exact IEEE
    at::Tensor denom = (s.exp_avg_sq.sqrt() / bias2_sqrt).add_(o.eps);
    s.param.addcdiv_(s.exp_avg, denom, -lr / bias1);
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
  std::vector<kernels::SgdTensor> sgd_run;
  std::vector<kernels::AdamTensor> adam_run;
  std::int64_t run_step = 0;
  const auto flush = [&] {
    if (!sgd_run.empty()) kernels::sgd_update(sgd_run, sgd_scalars(run_step, lr));
    if (!adam_run.empty()) kernels::adam_update(adam_run, adam_scalars(run_step, lr));
    sgd_run.clear();
    adam_run.clear();
  };
  for (Slot& s : slots_) {
    if (!s.param.grad().defined()) continue;  // a parameter the loss does not reach
    TORCH_CHECK(s.param.is_contiguous() && s.param.scalar_type() == at::kFloat,
                "portable optimizer: ", s.name, " is not a contiguous float32 tensor");
    const std::int64_t step = next_step(s);
    const at::Tensor& grad = grads.emplace_back(s.param.grad().contiguous());
    if (step != run_step) flush();
    run_step = step;
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
kernels::SgdStep Optimizer::sgd_scalars(std::int64_t step, double lr) const {
  kernels::SgdStep k;
  k.lr = static_cast<float>(lr);
  k.momentum = static_cast<float>(spec_.momentum);
  k.weight_decay = static_cast<float>(spec_.weight_decay);
  k.nesterov = spec_.nesterov;
  k.first = step == 1;
  return k;
}

// The step's scalars in binary64 (IEEE operations only: power() multiplies, sqrt is exact) and
// each rounded once to binary32 (docs/portable.md, "Optimizers").
kernels::AdamStep Optimizer::adam_scalars(std::int64_t step, double lr) const {
  const OptimizerSpec& o = spec_;
  kernels::AdamStep k;
  k.lr = static_cast<float>(lr);
  k.lr_over_bias1 = static_cast<float>(lr / (1.0 - power(o.beta1, step)));
  k.bias2_sqrt = static_cast<float>(std::sqrt(1.0 - power(o.beta2, step)));
  k.weight_decay = static_cast<float>(o.weight_decay);
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

}  // namespace vt::training
