#include "kernels/trace.h"

namespace vt::kernels::trace {
namespace {

thread_local Sink* installed = nullptr;
// True while a recording call runs on this thread: kernels it calls belong to it.
thread_local bool inside = false;

}  // namespace

Sink* install(Sink* sink) {
  Sink* previous = installed;
  installed = sink;
  return previous;
}

bool active() { return installed != nullptr && !inside && installed->listening(); }

Call::Call(std::string_view op, std::span<const Param> params, std::span<const Operand> inputs) {
  if (installed == nullptr || inside || !installed->listening()) return;
  sink_ = installed;
  inside = true;
  try {
    sink_->begin(op, params, inputs);
  } catch (...) {  // the sink ends the computation here (Sink::begin): the call never runs
    inside = false;
    throw;
  }
}

Call::~Call() {
  if (sink_ != nullptr) inside = false;
}

void Call::outputs(std::span<const Operand> outputs) {
  if (sink_ != nullptr) sink_->end(outputs);
}

}  // namespace vt::kernels::trace
