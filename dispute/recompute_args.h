#pragma once
// What the referee's recomputations share (dispute/recompute.cpp, the operators of the portable
// step; dispute/recompute_models.cpp, those of real models): one call's parameters and operands,
// each checked against its bounds as an operator's code asks for it.

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "dispute/step_trace.h"

namespace vt::dispute::referee {

// At most 2^28 values per operand (1 GiB of binary32): larger is not a step of any model the
// referee is meant for, and refusing it bounds what a hostile call can make it allocate.
constexpr std::int64_t kMaxValues = std::int64_t{1} << 28;

// What does not fit: thrown by the recomputations only, returned as invalid input by recompute().
struct Unfit {
  std::string message;
};

// The product of sizes, refused when it passes kMaxValues (so it never overflows).
inline std::int64_t values(std::initializer_list<std::int64_t> sizes) {
  std::int64_t total = 1;
  for (std::int64_t s : sizes) {
    if (s < 0 || (s > 0 && total > kMaxValues / s))
      throw Unfit{"the sizes give more than 2^28 values"};
    total *= s;
  }
  return total;
}

// One call's parameters and operands, checked as the operator's code asks for them; the outputs
// it creates, by name.
class Args {
 public:
  Args(const TracedCall& call, const std::vector<OperandValues>& inputs)
      : call_(call), inputs_(inputs) {}

  std::int64_t integer(std::string_view name, std::int64_t lo = 0, std::int64_t hi = kMaxValues) {
    const TracedParam& p = param(name, false);
    if (p.integer < lo || p.integer > hi)
      throw Unfit{"parameter " + std::string(name) + " = " + std::to_string(p.integer) +
                  " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"};
    return p.integer;
  }
  // A parameter the call records only where it applies (an LSTM's proj): `absent` without it.
  std::int64_t integer_or(std::string_view name, std::int64_t absent, std::int64_t lo = 0,
                          std::int64_t hi = kMaxValues) {
    for (const TracedParam& p : call_.params)
      if (p.name == name) return integer(name, lo, hi);
    return absent;
  }
  bool flag(std::string_view name) { return integer(name, 0, 1) != 0; }
  std::uint64_t bits64(std::string_view name) {  // a 64-bit pattern (a random stream's state)
    return static_cast<std::uint64_t>(param(name, false).integer);
  }
  float real(std::string_view name) { return param(name, true).real; }

  const float* in(std::string_view name, std::int64_t count) {
    const float* p = in_or_none(name, count);
    if (p == nullptr && count > 0) throw Unfit{"input " + std::string(name) + " is absent"};
    return p;
  }
  const float* in_or_none(std::string_view name, std::int64_t count) {
    const OperandValues& v = input(name, DType::kF32);
    if (v.bytes.empty()) return nullptr;
    check_count(v, count);
    return reinterpret_cast<const float*>(v.bytes.data());
  }
  // Ids, each in [lo, bound) (a max pool's argmax may be −1: a window over padding alone).
  const std::int64_t* ids(std::string_view name, std::int64_t count, std::int64_t bound,
                          std::int64_t lo = 0) {
    const OperandValues& v = input(name, DType::kI64);
    check_count(v, count);
    const auto* p = reinterpret_cast<const std::int64_t*>(v.bytes.data());
    for (std::int64_t i = 0; i < count; ++i) {
      if (p[i] < lo || p[i] >= bound)
        throw Unfit{"input " + std::string(name) + "[" + std::to_string(i) +
                    "] = " + std::to_string(p[i]) + " is outside [" + std::to_string(lo) + ", " +
                    std::to_string(bound) + ")"};
    }
    return p;
  }
  // Class targets of a loss: each in [0, classes) or equal to ignore_index.
  const std::int64_t* targets(std::int64_t rows, std::int64_t classes, std::int64_t ignore_index) {
    const OperandValues& v = input("targets", DType::kI64);
    check_count(v, rows);
    const auto* p = reinterpret_cast<const std::int64_t*>(v.bytes.data());
    for (std::int64_t i = 0; i < rows; ++i) {
      if (p[i] != ignore_index && (p[i] < 0 || p[i] >= classes))
        throw Unfit{"input targets[" + std::to_string(i) + "] = " + std::to_string(p[i]) +
                    " is outside [0, " + std::to_string(classes) + ")"};
    }
    return p;
  }
  std::int64_t count_of(std::string_view name) {
    const OperandValues& v = input(name, DType::kF32);
    return static_cast<std::int64_t>(v.bytes.size() / sizeof(float));
  }

  // A fresh output of `count` values (+0.0 to start).
  float* out(std::string_view name, std::int64_t count) {
    Bytes& b = outputs_[std::string(name)];
    b.assign(static_cast<std::size_t>(count) * sizeof(float), 0);
    return reinterpret_cast<float*>(b.data());
  }
  // An output the call may leave absent: null when the trace records it absent.
  float* out_or_none(std::string_view name, std::int64_t count) {
    return traced_absent(name) ? nullptr : out(name, count);
  }
  // A fresh output of `count` ids (a max pool's argmax), or null when traced absent.
  std::int64_t* ids_out_or_none(std::string_view name, std::int64_t count) {
    if (traced_absent(name)) return nullptr;
    Bytes& b = outputs_[std::string(name)];
    b.assign(static_cast<std::size_t>(count) * sizeof(std::int64_t), 0);
    id_outputs_.insert(std::string(name));
    return reinterpret_cast<std::int64_t*>(b.data());
  }
  // An output that starts as the input of the same name (an update in place).
  float* in_out(std::string_view name, std::int64_t count) {
    const float* from = in(name, count);
    float* to = out(name, count);
    if (count > 0) std::memcpy(to, from, static_cast<std::size_t>(count) * sizeof(float));
    return to;
  }
  float* in_out_or_none(std::string_view name, std::int64_t count) {
    return in_or_none(name, count) == nullptr ? nullptr : in_out(name, count);
  }

  // The outputs in the trace's order; one the operator did not produce is absent.
  std::vector<OperandValues> results() {
    std::vector<OperandValues> out;
    for (const OperandHash& h : call_.outputs) {
      OperandValues v{h.name, id_outputs_.contains(h.name) ? DType::kI64 : DType::kF32, {}};
      if (auto it = outputs_.find(h.name); it != outputs_.end()) v.bytes = std::move(it->second);
      out.push_back(std::move(v));
    }
    return out;
  }

 private:
  const TracedParam& param(std::string_view name, bool real) {
    for (const TracedParam& p : call_.params) {
      if (p.name == name) {
        if (p.is_real != real)
          throw Unfit{"parameter " + std::string(name) + " should be " +
                      (real ? "a binary32 value" : "an integer")};
        return p;
      }
    }
    throw Unfit{"parameter " + std::string(name) + " is missing"};
  }
  const OperandValues& input(std::string_view name, DType dtype) {
    for (const OperandValues& v : inputs_) {
      if (v.name == name) {
        if (v.dtype != dtype)
          throw Unfit{"input " + std::string(name) + " should be " +
                      std::string(dtype_name(dtype))};
        return v;
      }
    }
    throw Unfit{"input " + std::string(name) + " is missing"};
  }
  static void check_count(const OperandValues& v, std::int64_t count) {
    const auto have = static_cast<std::int64_t>(v.bytes.size() / dtype_bytes(v.dtype));
    if (have != count)
      throw Unfit{"input " + v.name + " holds " + std::to_string(have) +
                  " values; the parameters " + "call for " + std::to_string(count)};
  }
  bool traced_absent(std::string_view name) const {
    for (const OperandHash& h : call_.outputs)
      if (h.name == name) return h.count == 0;
    return true;
  }

  const TracedCall& call_;
  const std::vector<OperandValues>& inputs_;
  std::map<std::string, Bytes> outputs_;
  std::set<std::string> id_outputs_;
};

using Recompute = std::function<void(Args&)>;

// Adds the operators of real models (pools, group norm, batched products, recurrent layers,
// further losses, reductions, channel dropout, Bernoulli draws).
void add_model_operators(std::map<std::string_view, Recompute>& ops);

}  // namespace vt::dispute::referee
