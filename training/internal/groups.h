#pragma once
// One training step as gradient groups (docs/training.md, "Gradient groups"): the batch in G
// contiguous groups, each forward/backward alone, gradients and floating-point buffers summed
// along one fixed balanced binary tree over group indices. Internal to training/ (ATen).

#include <functional>
#include <memory>

#include "training/distributed.h"
#include "training/model/network.h"

namespace vt::training {

class GroupedStep {
 public:
  // `collective` may be null (one process, every group here); else this rank runs groups
  // [rank·G/W, (rank+1)·G/W). Throws std::invalid_argument when W does not divide G.
  GroupedStep(std::int64_t groups, Network& net, std::shared_ptr<Collective> collective);

  // The loss of group `group`'s examples, unscaled (the caller owns autocast and the loss rule).
  using LossFn =
      std::function<at::Tensor(const at::Tensor& x, const at::Tensor& y, std::int64_t group)>;

  // Leaves in every parameter's .grad() the tree sum of the groups' gradients of loss/G, sets
  // every floating-point buffer to the tree sum of the groups' buffers × 1/G, and returns the
  // step's loss: the tree sum of loss/G (a float scalar). Identical bits for any W.
  at::Tensor run(const at::Tensor& x, const at::Tensor& y, const LossFn& loss_of);

  std::int64_t first_group() const { return first_; }
  std::int64_t local_groups() const { return local_; }

 private:
  std::int64_t groups_;
  std::int64_t first_ = 0;
  std::int64_t local_ = 0;
  Network& net_;
  std::shared_ptr<Collective> collective_;
};

}  // namespace vt::training
