#pragma once
// The operators a training step calls, as they are called (docs/dispute.md, "The step trace").
// A provider's trace and an auditor's trace of the same step are lists of these calls; the first
// call whose inputs agree and whose outputs do not is the one operator a dispute comes down to,
// and a referee recomputes that call alone.
//
// One call: a call into a kernel that records (the list in docs/dispute.md) made on the thread
// that installed the sink, not from inside another recording kernel. Work a kernel hands to its
// threads, and kernels it calls, are part of that call. With no sink installed a call costs a
// thread-local load and a branch.

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

namespace vt::kernels::trace {

// A buffer an operator reads or writes, in its logical order: row-major, `count` values.
// Exactly one of f32 and i64 is set (i64: class and token ids).
struct Operand {
  std::string_view name;
  const float* f32 = nullptr;
  const std::int64_t* i64 = nullptr;
  std::int64_t count = 0;
};

// An operator's parameter: an integer (sizes, flags, stream states) or a binary32 value.
struct Param {
  std::string_view name;
  std::int64_t integer = 0;
  float real = 0.0f;
  bool is_real = false;
};
inline Param integer(std::string_view name, std::int64_t value) {
  return {name, value, 0.0f, false};
}
inline Param real(std::string_view name, float value) { return {name, 0, value, true}; }

class Sink {
 public:
  virtual ~Sink() = default;
  // Before the operator runs. Inputs are read now: an operator may overwrite one (an optimizer
  // update writes the parameter it reads). A sink may throw here to end the computation that
  // made the call (dispute::TraceRecorder does once it has its answer); the call does not run.
  virtual void begin(std::string_view op, std::span<const Param> params,
                     std::span<const Operand> inputs) = 0;
  // After it ran. The output buffers are the caller's writable memory; the recorders only read
  // them, the test cheaters of tests/adversary rewrite them (what a provider running other code
  // would produce).
  virtual void end(std::span<const Operand> outputs) = 0;

  // False once the sink has all it needs: kernels call it no more and prepare no operands for it
  // (a product's operands in logical order), as if none were installed.
  bool listening() const { return listening_; }

 protected:
  void stop_listening() { listening_ = false; }

 private:
  bool listening_ = true;
};

// Records this thread's calls into `sink` until install(nullptr). Returns the sink it replaces.
Sink* install(Sink* sink);
// A listening sink is installed on this thread and no recording call is under way.
bool active();

// One recorded call, from its inputs to its outputs:
//   trace::Call call("gelu", {trace::integer("n", n)}, {{"x", x, nullptr, n}});
//   ... compute y ...
//   call.outputs({{"y", y, nullptr, n}});
class Call {
 public:
  Call(std::string_view op, std::initializer_list<Param> params,
       std::initializer_list<Operand> inputs)
      : Call(op, std::span(params.begin(), params.size()),
             std::span(inputs.begin(), inputs.size())) {}
  Call(std::string_view op, std::span<const Param> params, std::span<const Operand> inputs);
  ~Call();
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  bool recording() const { return sink_ != nullptr; }
  void outputs(std::initializer_list<Operand> outputs) {
    this->outputs(std::span(outputs.begin(), outputs.size()));
  }
  void outputs(std::span<const Operand> outputs);

 private:
  Sink* sink_ = nullptr;
};

// Operand helpers for the common cases.
inline Operand f32(std::string_view name, const float* data, std::int64_t count) {
  return {name, data, nullptr, count};
}
// An optional buffer (a norm's weight): absent is zero values.
inline Operand f32_or_none(std::string_view name, const float* data, std::int64_t count) {
  return {name, data, nullptr, data != nullptr ? count : 0};
}
inline Operand i64(std::string_view name, const std::int64_t* data, std::int64_t count) {
  return {name, nullptr, data, count};
}

}  // namespace vt::kernels::trace
