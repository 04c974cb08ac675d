#pragma once
// A sink for the dispute tests that records every call's values as well as its roots.

#include <optional>
#include <vector>

#include "dispute/step_trace.h"

namespace vt::testing {

class CaptureAll : public kernels::trace::Sink {
 public:
  void begin(std::string_view op, std::span<const kernels::trace::Param> params,
             std::span<const kernels::trace::Operand> inputs) override {
    pending_.emplace(0);
    pending_->begin(op, params, inputs);
  }
  void end(std::span<const kernels::trace::Operand> outputs) override {
    pending_->end(outputs);
    calls.push_back(pending_->calls().front());
    values.push_back(*pending_->captured());
    pending_.reset();
  }
  std::vector<dispute::TracedCall> calls;
  std::vector<dispute::CallValues> values;

 private:
  std::optional<dispute::TraceRecorder> pending_;
};

}  // namespace vt::testing
