#pragma once
// TorchScript modules in portable arithmetic (docs/portable.md, "TorchScript modules"): the
// rewrite of a module's forward onto the veritrain:: operators (training/script/operators.h).
// LibTorch types: for training/ alone.

#include <torch/script.h>

#include <string>

#include "common/result.h"

namespace vt::training {

// Rewrites `module`'s forward (inlined) so that each operator with a portable kernel calls it
// (veritrain::linear for aten::linear, ...), and leaves the operators that round nothing or
// round one IEEE operation per element on every CPU alike (views, element-wise add, mul, ...).
// Refuses, naming every one, a module whose forward runs any other operator. Give it a clone of
// the module (Module::clone(true): the same parameter tensors): the rewritten graph calls
// operators only this process has, so it must never be saved.
Status make_portable(torch::jit::Module& module, const std::string& file);

}  // namespace vt::training
