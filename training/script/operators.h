#pragma once
// The veritrain:: operators a rewritten TorchScript module calls (training/script/rewrite.h),
// registered once per process, and the arithmetic their random draws come from. Torch-free, but
// for training/ alone.

namespace vt::training {

class Ops;  // training/model/ops.h

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
