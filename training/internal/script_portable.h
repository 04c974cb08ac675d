#pragma once
// TorchScript modules in portable arithmetic (docs/portable.md, "TorchScript modules"). Internal
// to training/ (LibTorch types).

#include <torch/script.h>

#include <string>

#include "common/result.h"

namespace vt::training {

class Ops;

// Rewrites `module`'s forward (inlined) so that each operator with a portable kernel calls it
// (veritrain::linear for aten::linear, ...), and leaves the operators that round nothing or
// round one IEEE operation per element on every CPU alike (views, element-wise add, mul, ...).
// Refuses, naming every one, a module whose forward runs any other operator. Give it a clone of
// the module (Module::clone(true): the same parameter tensors): the rewritten graph calls
// operators only this process has, so it must never be saved.
Status make_portable(torch::jit::Module& module, const std::string& file);

// The arithmetic whose dropout stream a rewritten module's aten::dropout draws from, on this
// thread, until the next call (nullptr: none; dropout in training then fails).
void set_script_ops(Ops* ops);

// set_script_ops(ops) for one forward pass, however it ends.
struct ScriptOpsScope {
  explicit ScriptOpsScope(Ops* ops) { set_script_ops(ops); }
  ~ScriptOpsScope() { set_script_ops(nullptr); }
  ScriptOpsScope(const ScriptOpsScope&) = delete;
  ScriptOpsScope& operator=(const ScriptOpsScope&) = delete;
};

}  // namespace vt::training
