#pragma once
// What script/random.cpp lends the other veritrain:: operators: the dropout of the task's stream
// (aten::dropout's, and the recurrent layers' between layers). Internal to training/script/.

#include <ATen/core/Tensor.h>

namespace vt::training {

// Dropout with probability p where `train`, from the arithmetic set_script_ops set on this
// thread; x itself where it draws nothing.
at::Tensor script_dropout(const at::Tensor& x, double p, bool train);

}  // namespace vt::training
