#include "training/internal/groups.h"

#include <c10/core/GradMode.h>

#include <stdexcept>
#include <utility>
#include <vector>

#include "training/internal/tree_reduce.h"

namespace vt::training {
namespace {

// The tree sums whole flat vectors, one per group; mixed dtypes would need one per dtype.
void require_float(const NamedTensors& tensors, const char* kind, bool floating_only) {
  for (const auto& [name, t] : tensors) {
    if (floating_only && !t.is_floating_point()) continue;
    if (t.scalar_type() != at::kFloat) {
      throw std::invalid_argument(std::string("gradient_groups > 1 needs float32 ") + kind + "; " +
                                  name + " is " + std::string(c10::toString(t.scalar_type())));
    }
  }
}

}  // namespace

GroupedStep::GroupedStep(std::int64_t groups, Network& net, std::shared_ptr<Collective> collective)
    : groups_(groups), net_(net), collective_(std::move(collective)) {
  const std::int64_t world = collective_ ? collective_->world_size() : 1;
  const std::int64_t rank = collective_ ? collective_->rank() : 0;
  if (world > groups_ || groups_ % world != 0) {
    throw std::invalid_argument("world size " + std::to_string(world) +
                                " does not divide gradient_groups " + std::to_string(groups_) +
                                " (each rank owns G/W whole groups)");
  }
  local_ = groups_ / world;
  first_ = rank * local_;
  require_float(net_.parameters(), "parameters", false);
  require_float(net_.buffers(), "floating-point buffers", true);
}

at::Tensor GroupedStep::run(const at::Tensor& x, const at::Tensor& y, const LossFn& loss_of) {
  const std::int64_t per_group = x.size(0) / groups_;
  // 1/G is a power of two: scaling by it is exact, so where it happens changes no bit of the
  // sum (docs/training.md). Underflow to subnormals aside, which nothing here comes near.
  const double scale = 1.0 / static_cast<double>(groups_);
  NamedTensors params = net_.parameters();
  NamedTensors buffers = net_.buffers();
  // Every group's forward starts from the step's buffers, as if it ran alone.
  std::vector<at::Tensor> start;
  start.reserve(buffers.size());
  for (auto& [name, b] : buffers) start.push_back(b.clone());
  std::vector<bool> reached(params.size(), false);

  // Partial sums waiting for their sibling: (height in the tree, flat values). Merging equal
  // heights as groups arrive in index order builds the balanced tree over the local groups.
  std::vector<std::pair<int, at::Tensor>> pending;
  for (std::int64_t g = first_; g < first_ + local_; ++g) {
    if (g != first_) {
      c10::NoGradGuard no_grad;
      for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].second.copy_(start[i]);
    }
    for (auto& [name, p] : params) {
      if (p.grad().defined()) p.mutable_grad() = at::Tensor();
    }
    at::Tensor loss =
        loss_of(x.narrow(0, g * per_group, per_group), y.narrow(0, g * per_group, per_group), g);
    loss.mul(scale).backward();
    c10::NoGradGuard no_grad;
    std::vector<at::Tensor> parts;
    parts.reserve(params.size() + buffers.size() + 1);
    for (std::size_t i = 0; i < params.size(); ++i) {
      const at::Tensor& p = params[i].second;
      const at::Tensor& grad = p.grad();
      reached[i] = reached[i] || grad.defined();
      parts.push_back(grad.defined() ? grad.reshape({-1}) : at::zeros({p.numel()}, p.options()));
    }
    for (auto& [name, b] : buffers) {
      if (b.is_floating_point()) parts.push_back(b.reshape({-1}).mul(scale));
    }
    parts.push_back(loss.detach().to(at::kFloat).reshape({1}).mul(scale));
    if (collective_) {
      // Whether each parameter got a gradient in this group, as 0/1: summed by the same tree,
      // a count > 0 is the OR over all G groups, on every rank alike and as one process running
      // the G groups in a row sees it. A rank's own groups alone can disagree (a data-dependent
      // branch), and the ranks would then diverge in the optimizer update.
      std::vector<float> flags(params.size());
      for (std::size_t i = 0; i < params.size(); ++i)
        flags[i] = params[i].second.grad().defined() ? 1.0f : 0.0f;
      parts.push_back(at::tensor(flags, at::kFloat).to(loss.device()));
    }
    pending.emplace_back(0, at::cat(parts));
    while (pending.size() >= 2 &&
           pending[pending.size() - 1].first == pending[pending.size() - 2].first) {
      at::Tensor right = std::move(pending.back().second);
      pending.pop_back();
      pending.back().second.add_(right);
      ++pending.back().first;
    }
  }
  at::Tensor total = std::move(pending.back().second);
  c10::NoGradGuard no_grad;
  if (collective_) {
    tree_allreduce(*collective_, total);
    const auto n = static_cast<std::int64_t>(params.size());
    const at::Tensor counts = total.narrow(0, total.size(0) - n, n).cpu();
    for (std::int64_t i = 0; i < n; ++i)
      reached[static_cast<std::size_t>(i)] = counts[i].item<float>() > 0.0f;
  }

  std::int64_t offset = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    at::Tensor& p = params[i].second;
    const std::int64_t n = p.numel();
    p.mutable_grad() = reached[i] ? total.narrow(0, offset, n).view(p.sizes()) : at::Tensor();
    offset += n;
  }
  for (auto& [name, b] : buffers) {
    if (!b.is_floating_point()) continue;  // counters: every group advanced them alike
    b.copy_(total.narrow(0, offset, b.numel()).view(b.sizes()));
    offset += b.numel();
  }
  return total.narrow(0, offset, 1).reshape({});
}

}  // namespace vt::training
