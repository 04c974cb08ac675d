#pragma once
// The operand values operator evidence carries (docs/dispute.md, "Operator evidence"): each
// operand whole, as base64, or in part: the chunks one disputed value reads (dispute/cone.h),
// each with the proof that takes it to the operand's signed root. Values outside the given chunks
// are held as NaN (f32) or 0 (i64), so the referee's kernels run on full-size operands and only
// the disputed value, which reads none of them, is compared.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dispute/referee.h"

namespace vt::dispute {

nlohmann::json evidence_operands_to_json(const std::vector<OperandValues>& values,
                                         const std::vector<OperandChunks>& chunks);

// Reads the operands of one side of the call and checks them against what the provider signed
// (`signed_operands`: name, dtype, count, root; a whole operand's bytes, a partial one's every
// chunk with its proof); `chunks` gets what was given of each. `budget` bounds the bytes the
// partial operands may make the reader allocate (their counts are the provider's, not the file's
// length) and is spent by them. Invalid input for a malformed document, rejected for values that
// are not the ones signed.
Result<std::vector<OperandValues>> evidence_operands_from_json(
    const nlohmann::json& j, const std::vector<OperandHash>& signed_operands,
    std::vector<OperandChunks>& chunks, std::uint64_t& budget, const std::string& where);

// Whether values [begin, end) of an operand lie in the chunks `chunks` gives of it.
bool gives(const OperandChunks& chunks, DType dtype, std::int64_t begin, std::int64_t end);

// `whole` (every operand whole) cut down to the chunks one differing output value reads
// (dispute/cone.h): of the first few differing values of each output, the one whose evidence is
// smallest among those the referee, shown only that, rules against the provider on; nothing
// when there is none (the operator is refereed on whole operands, or its outputs are what the
// arithmetic gives). An operand is given whole where that is smaller than its chunks and proofs.
std::optional<OperatorEvidence> narrow_to_one_value(const OperatorEvidence& whole);

// Evidence for value `index` of output `output` alone: `whole` (every operand whole) cut down
// to the chunks that value reads; nothing when the operator has no such cut (dispute/cone.h).
std::optional<OperatorEvidence> one_value_evidence(const OperatorEvidence& whole,
                                                   std::size_t output, std::int64_t index);

// `whole` cut down to the chunks (ascending) `keep`, with their proofs; the other values filled.
OperandChunks keep_chunks(OperandValues& whole, const std::vector<std::uint64_t>& keep);

}  // namespace vt::dispute
