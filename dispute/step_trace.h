#pragma once
// A training step's trace (docs/dispute.md): every operator call the portable arithmetic made in
// one step, in order, each with its parameters and the Merkle root of every operand's canonical
// bytes (little-endian values in the operand's logical order) over 1 KiB chunks. The provider
// signs a header that commits to the calls through a Merkle root, so one call can be shown with a
// short proof, and one value of one operand with a chunk and another.

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/sha256.h"
#include "dispute/operand_digests.h"
#include "kernels/trace.h"
#include "protocol/keys.h"

namespace vt::dispute {

enum class DType { kF32, kI64 };
std::string_view dtype_name(DType d);
std::size_t dtype_bytes(DType d);

struct OperandHash {
  std::string name;
  DType dtype = DType::kF32;
  std::int64_t count =
      0;          // 0: the operand is absent (an optional weight, a gradient not asked for)
  Digest root{};  // operand_root of its canonical bytes
  bool operator==(const OperandHash&) const = default;
};

// Operands are committed in chunks of 1 KiB (256 f32 or 128 i64 values): small enough that the
// evidence for one disputed value is a few kilobytes, large enough that the tree adds a tenth to
// the hashing of a step.
inline constexpr std::size_t kOperandChunkBytes = 1024;
// The Merkle root (fingerprint/merkle.h) of an operand's canonical bytes in kOperandChunkBytes
// leaves; the SHA-256 of no bytes for an absent operand.
Digest operand_root(ByteSpan bytes);

struct TracedParam {
  std::string name;
  std::int64_t integer = 0;
  float real = 0.0f;
  bool is_real = false;
  bool operator==(const TracedParam& o) const;  // reals compare by bits
};

struct TracedCall {
  std::string op;
  std::vector<TracedParam> params;
  std::vector<OperandHash> inputs, outputs;
  bool operator==(const TracedCall&) const = default;
};

// The identity of a trace: whose task, which step of which epoch.
struct TraceHeader {
  Digest task_id{};
  std::uint64_t epoch = 0;  // the epoch being trained (its start state is epoch − 1)
  std::int64_t step = 0;    // 1-based step in the epoch
  std::int64_t calls = 0;
  Digest calls_root{};  // Merkle root over call_leaf(i, call) (RFC 6962 tree)
};

struct StepTrace {
  TraceHeader header;
  std::vector<TracedCall> calls;
};

// Bounds on what a trace read from a provider may hold.
inline constexpr std::int64_t kMaxTraceCalls = 1 << 20;
inline constexpr std::size_t kMaxCallOperands = 64;
inline constexpr std::size_t kMaxCallParams = 64;
// A trace's text (a gpt step's is about 90 kB) and a call's values or operator evidence (a large
// layer's operands in base64): what a reader accepts before parsing.
inline constexpr std::uint64_t kMaxTraceText = std::uint64_t{64} << 20;
inline constexpr std::uint64_t kMaxValuesText = std::uint64_t{1} << 30;

nlohmann::json call_to_json(std::int64_t index, const TracedCall& call);
Result<TracedCall> call_from_json(const nlohmann::json& j, std::int64_t expected_index,
                                  const std::string& where);
Digest call_leaf(std::int64_t index, const TracedCall& call);
Digest calls_root(const std::vector<TracedCall>& calls);
nlohmann::json header_to_json(const TraceHeader& h);
Result<TraceHeader> header_from_json(const nlohmann::json& j, const std::string& where);

// A call's place under the calls root: the sibling hashes from its leaf up.
struct CallProof {
  std::int64_t index = 0;
  std::int64_t calls = 0;
  std::vector<Digest> path;
};
CallProof prove_call(const std::vector<TracedCall>& calls, std::int64_t index);
bool verify_call(const Digest& root, const TracedCall& call, const CallProof& proof);

struct SignedTrace {
  StepTrace trace;
  PublicKey signer;
  Bytes signature;  // over canonical_json(header_to_json(trace.header))
};
std::string write_signed_trace(const StepTrace& trace, const SigningKey& key);
// Checks the signature and that the calls hash to the signed root; `where` names the document.
Result<SignedTrace> read_signed_trace(std::string_view text, const std::string& where);

// The operands of one call, as values (little-endian bytes).
struct OperandValues {
  std::string name;
  DType dtype = DType::kF32;
  Bytes bytes;
};
struct CallValues {
  std::int64_t index = -1;
  std::vector<OperandValues> inputs, outputs;
};
nlohmann::json values_to_json(const std::vector<OperandValues>& values);
Result<std::vector<OperandValues>> values_from_json(const nlohmann::json& j,
                                                    const std::string& where);
// The provider's answer for one call: its values, for the trace (task, epoch, step) `header` names.
std::string write_call_values(const TraceHeader& header, const CallValues& values);
// Invalid input when the file is malformed or for another trace than `header`'s.
Result<CallValues> read_call_values(std::string_view text, const std::string& where,
                                    const TraceHeader& header);
// Whether each value hashes to the trace's operand of the same place (name, dtype, count, root).
Status check_values(const std::vector<OperandValues>& values,
                    const std::vector<OperandHash>& hashes, const std::string& what);

// Records the calls of a step: hashes every operand; keeps the values of call `capture`. With
// `background`, new operands are hashed on a helper thread while the step runs (the auditor's and
// the provider's replays); calls() and take_calls() wait for the last digest.
//
// Given the provider's calls (compare_with), the recorder compares each finished call with the
// provider's as its digests come in and stops at the first that is not equal: the calls it keeps
// end with that one, no operand after it is hashed, and the next call's begin() throws StepCut,
// which ends the step there: nothing after it is needed (docs/dispute.md, "Where two traces
// part"). Where an exception may not be thrown (inside a parallel_for) the step runs on untraced.
struct StepCut : std::exception {
  const char* what() const noexcept override {
    return "the replay stopped at the first call that parts from the provider's trace";
  }
};

class TraceRecorder : public kernels::trace::Sink {
 public:
  // What a recorder may keep of a step's values to recognise repeats (OperandDigests).
  static constexpr std::size_t kMemoBytes = std::size_t{512} << 20;

  explicit TraceRecorder(std::optional<std::int64_t> capture = std::nullopt,
                         bool background = false)
      : capture_(capture), digests_(kMemoBytes, background) {}
  void begin(std::string_view op, std::span<const kernels::trace::Param> params,
             std::span<const kernels::trace::Operand> inputs) override;
  void end(std::span<const kernels::trace::Operand> outputs) override;

  const std::vector<TracedCall>& calls() {
    settle();
    return calls_;
  }
  std::vector<TracedCall> take_calls() {
    settle();
    return std::move(calls_);
  }
  const std::optional<CallValues>& captured() const { return captured_; }
  // The provider's calls, which must outlive the recording; not with `capture`.
  void compare_with(const std::vector<TracedCall>* provider) { provider_ = provider; }
  // The first call, by index, that is not the provider's, once the recording stopped at it.
  std::optional<std::size_t> parted() const { return parted_; }
  // Operand bytes hashed, and those recognised as values this step already hashed.
  std::size_t hashed_bytes() const { return digests_.hashed_bytes(); }
  std::size_t repeated_bytes() const { return digests_.repeated_bytes(); }

 private:
  void record(const kernels::trace::Operand& o, bool output);
  void settle();
  void compare_ready_calls();

  struct Pending {  // an operand hash that waits for its digest
    std::size_t call, operand;
    bool output;
    OperandDigests::Ticket ticket;
  };
  std::optional<std::int64_t> capture_;
  std::vector<TracedCall> calls_;
  std::optional<CallValues> captured_;
  OperandDigests digests_;
  std::vector<Pending> pending_;
  // For compare_with: the provider's calls; where each finished call's operands end in
  // pending_; the operands with their digest filled in (a prefix of pending_); the calls found
  // equal to the provider's (a prefix of calls_); the first that is not.
  const std::vector<TracedCall>* provider_ = nullptr;
  std::vector<std::size_t> call_ends_;
  std::size_t filled_ = 0, agreed_ = 0;
  std::optional<std::size_t> parted_;
};

// A sink that passes every call on to `next` when one is set: the base of sinks that act on the
// calls and still let a recorder see them (tests/adversary's cheaters).
class ForwardingSink : public kernels::trace::Sink {
 public:
  void set_next(kernels::trace::Sink* next) { next_ = next; }
  void begin(std::string_view op, std::span<const kernels::trace::Param> params,
             std::span<const kernels::trace::Operand> inputs) override {
    if (next_ != nullptr) next_->begin(op, params, inputs);
  }
  void end(std::span<const kernels::trace::Operand> outputs) override {
    if (next_ != nullptr) next_->end(outputs);
  }

 private:
  kernels::trace::Sink* next_ = nullptr;
};

// Installs a sink for this thread's kernel calls while it lives.
class ScopedSink {
 public:
  explicit ScopedSink(kernels::trace::Sink* sink) : previous_(kernels::trace::install(sink)) {}
  ~ScopedSink() { kernels::trace::install(previous_); }
  ScopedSink(const ScopedSink&) = delete;
  ScopedSink& operator=(const ScopedSink&) = delete;

 private:
  kernels::trace::Sink* previous_;
};

}  // namespace vt::dispute
