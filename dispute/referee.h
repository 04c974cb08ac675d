#pragma once
// Settling a dispute over one training step by one operator (docs/dispute.md).
//
// The auditor's trace and the provider's signed trace of the same step are compared call by call;
// the first call whose inputs agree and whose outputs do not is the disputed operator. The
// operator evidence carries that call as the provider signed it (its header, signature and the
// call's Merkle proof), the provider's values of its inputs and outputs (checked against the
// hashes it signed), and is signed by the auditor. A referee needs nothing else: it recomputes
// the call with kernels/ and rules.

#include <optional>
#include <string>
#include <vector>

#include "dispute/step_trace.h"
#include "protocol/log.h"

namespace vt::dispute {

struct Departure {
  enum class Kind {
    kOperator,   // call `call`: same operator, same inputs, other outputs: the dispute
    kUntraced,   // call `call` reads other inputs although every earlier call agrees: the
                 // difference arose between traced calls (docs/dispute.md, "What is not traced")
    kStructure,  // call `call` is another operator or has other parameters
    kLength,     // one trace ends earlier; every call both have agrees
  };
  Kind kind = Kind::kOperator;
  std::int64_t call = 0;
  std::string description;
};
std::string_view departure_kind_name(Departure::Kind kind);  // "operator", "untraced", ...

// Where `provider` first departs from `auditor`, or nothing when the calls are the same.
std::optional<Departure> first_departure(const StepTrace& auditor, const StepTrace& provider);

// Which chunks (kOperandChunkBytes) of one operand operator evidence gives: all of them, or
// `given` (ascending) with each one's proof under the operand's signed root.
struct OperandChunks {
  bool whole = true;
  std::vector<std::uint64_t> given;
  std::vector<std::vector<Digest>> proofs;  // per given chunk: sibling hashes, leaf upwards
};

// The one output value evidence of part of a call's operands rules on.
struct DisputedValue {
  std::string output;
  std::int64_t index = 0;
};

struct OperatorEvidence {
  TraceHeader header;  // the provider's signed trace header
  PublicKey provider;
  Bytes provider_signature;
  TracedCall call;  // the disputed call as the provider traced it
  CallProof proof;  // under header.calls_root
  // The provider's values of the call's operands. Of an operand given in part (below), every
  // value outside its given chunks is NaN (f32) or 0 (i64).
  std::vector<OperandValues> inputs, outputs;
  // Parallel to inputs and outputs; empty when every operand is given whole.
  std::vector<OperandChunks> input_chunks, output_chunks;
  // Set when the evidence rules on one value (docs/dispute.md, "Evidence for one value"); needed
  // when an operand is given in part.
  std::optional<DisputedValue> disputed;
  Digest auditor_calls_root{};  // the auditor's own trace of the step
  std::string place;            // where the call sits in the model, in words (for the reader)
  // The provider's signed commitments of epochs E − 1 and E (empty when not at hand): the
  // state the step starts from and the one it committed, under the key that signed the trace.
  std::vector<SignedRecord> records;
};

// Signed by `auditor`; canonical JSON.
std::string write_operator_evidence(const OperatorEvidence& evidence, const SigningKey& auditor);

struct CheckedEvidence {
  OperatorEvidence evidence;
  std::string auditor_fingerprint;
};
// Every check a referee makes before recomputing: both signatures, the call's proof under the
// signed root, the values against the signed hashes. Invalid input for a malformed document,
// rejected for one whose signatures or hashes do not hold.
Result<CheckedEvidence> read_operator_evidence(std::string_view text, const std::string& where);

// One value the provider's output has where the documented arithmetic gives another.
struct ValueDifference {
  std::string output;
  std::int64_t index = 0;  // in the output's logical order
  double provider = 0, documented = 0;
};

struct Ruling {
  bool provider_correct = false;
  std::string op;
  std::int64_t call = 0;
  std::vector<std::string> differing_outputs;  // names, with how many values differ
  std::vector<ValueDifference> examples;       // the first few differing values of each output
  std::string summary;                         // in words an arbiter reads
};
Result<Ruling> rule(const OperatorEvidence& evidence);

nlohmann::json ruling_to_json(const Ruling& ruling, const OperatorEvidence& evidence);

}  // namespace vt::dispute
