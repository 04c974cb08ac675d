#pragma once
// SGD (momentum, Nesterov, weight decay), Adam and AdamW with PyTorch's update rules, written
// over plain tensors. Our own rather than torch::optim because (1) the state must be a fixed
// set of named tensors present from step 0, so every snapshot of a task has the same layout,
// and (2) torch::optim's state keys changed type between LibTorch 1.13 and 2.x.

#include <ATen/ATen.h>

#include "kernels/optim.h"
#include "protocol/task.h"
#include "training/model/network.h"

namespace vt::training {

// Every name optimizer.no_decay holds is a parameter of the model: a task that names another
// would decay what its requestor meant to spare.
Status check_no_decay(const OptimizerSpec& spec, const NamedTensors& params);

class Optimizer {
 public:
  // `portable`: the updates of docs/portable.md ("Optimizers") in veritrain's kernels, on
  // contiguous float32 CPU tensors; else LibTorch's own operations.
  Optimizer(const OptimizerSpec& spec, const NamedTensors& params, bool portable = false);

  // One update with learning rate `lr`; the gradients are in the parameters' .grad(). With
  // spec.clip_grad_norm set they are clipped first (docs/training.md, "Recipes"); the
  // parameters spec.no_decay names update without weight decay.
  void step(double lr);
  void zero_grad();

  // "optim/<param>/<slot>" tensors: momentum_buffer (sgd with momentum), exp_avg and exp_avg_sq
  // (adam, adamw), and step (an int64 scalar) for every parameter.
  NamedTensors state() const;

 private:
  struct Slot {
    std::string name;
    at::Tensor param;
    at::Tensor momentum;    // sgd
    at::Tensor exp_avg;     // adam, adamw
    at::Tensor exp_avg_sq;  // adam, adamw
    at::Tensor step;        // int64 scalar on the CPU: read every update, never worth a sync
    bool decay = true;      // weight decay applies (not in spec.no_decay)
  };
  static std::int64_t next_step(Slot& s);  // the slot's step count, moved on by one
  void clip_gradients();
  void portable_clip_gradients();
  void portable_step(double lr);
  double weight_decay(const Slot& s) const { return s.decay ? spec_.weight_decay : 0.0; }
  kernels::SgdStep sgd_scalars(std::int64_t step, double lr, bool decay) const;
  kernels::AdamStep adam_scalars(std::int64_t step, double lr, bool decay) const;

  OptimizerSpec spec_;
  bool portable_ = false;
  std::vector<Slot> slots_;
};

// optimizer.ema_decay: a moving average of the model's floating-point parameters and buffers
// (docs/training.md, "Recipes"), starting from the tensors as they are when it is built. Its
// tensors are part of the committed state; held-out metrics and export read them.
class WeightAverage {
 public:
  // `live`: the model's parameters and buffers under their own names; integer buffers (a batch
  // norm's count) are not averaged.
  WeightAverage(double decay, const NamedTensors& live, bool portable);

  // a ← a·d + x·(1 − d) for every tensor, after an update.
  void update();
  // Exchanges the averaged values with the model's, so that the model computes with the
  // average; a second call puts everything back, bit for bit.
  void swap();
  // "ema/<name>" for every averaged tensor.
  NamedTensors state() const;
  // The average of `name`, or an undefined tensor when it is not averaged.
  at::Tensor average_of(const std::string& name) const;

 private:
  struct Pair {
    std::string name;
    at::Tensor live, average;
  };
  float decay_, one_minus_decay_;  // each rounded once from binary64
  double decay64_;
  bool portable_;
  std::vector<Pair> pairs_;
};

}  // namespace vt::training
