#include "dispute/referee.h"

#include <cstring>

#include "common/json.h"
#include "common/json_fields.h"
#include "dispute/cone.h"
#include "dispute/evidence_values.h"
#include "dispute/recompute.h"
#include "kernels/norm.h"

namespace vt::dispute {
namespace {

constexpr std::string_view kEvidenceFormat = "veritrain/operator-evidence/v2";
// What the partial operands of one evidence file may make a referee allocate (evidence_values.h).
constexpr std::uint64_t kPartialOperandBudget = std::uint64_t{1} << 30;

std::string call_words(std::int64_t index, const TracedCall& call) {
  return "call " + std::to_string(index) + " (" + call.op + ")";
}

bool same_inputs(const TracedCall& a, const TracedCall& b) { return a.inputs == b.inputs; }

constexpr std::size_t kExamplesPerOutput = 4;

double value_at(const OperandValues& v, std::size_t i) {
  if (v.dtype == DType::kI64) {
    std::int64_t x = 0;
    std::memcpy(&x, v.bytes.data() + i * 8, 8);
    return static_cast<double>(x);
  }
  float x = 0;
  std::memcpy(&x, v.bytes.data() + i * 4, 4);
  return x;
}

// How many values of `claimed` differ bit for bit from `recomputed`; the first few into
// `examples`.
std::int64_t differing_values(const OperandValues& recomputed, const OperandValues& claimed,
                              std::vector<ValueDifference>& examples) {
  if (recomputed.bytes.size() != claimed.bytes.size())
    return static_cast<std::int64_t>(std::max(recomputed.bytes.size(), claimed.bytes.size()) /
                                     dtype_bytes(claimed.dtype));
  const std::size_t width = dtype_bytes(claimed.dtype);
  std::int64_t differ = 0;
  std::size_t shown = 0;
  for (std::size_t i = 0; i < claimed.bytes.size(); i += width) {
    if (std::memcmp(recomputed.bytes.data() + i, claimed.bytes.data() + i, width) == 0) continue;
    ++differ;
    if (shown++ < kExamplesPerOutput)
      examples.push_back({claimed.name, static_cast<std::int64_t>(i / width),
                          value_at(claimed, i / width), value_at(recomputed, i / width)});
  }
  return differ;
}

nlohmann::json proof_to_json(const CallProof& p) {
  nlohmann::json path = nlohmann::json::array();
  for (const Digest& d : p.path) path.push_back(hex_encode(d));
  return {{"index", p.index}, {"calls", p.calls}, {"path", path}};
}

Result<CallProof> proof_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return invalid_input(where + ": expected an object");
  JsonFields f(j, where);
  VT_RETURN_IF_ERROR(f.known_keys({"index", "calls", "path"}));
  CallProof p;
  std::vector<std::string> path;
  VT_RETURN_IF_ERROR(f.integer("index", p.index, true));
  VT_RETURN_IF_ERROR(f.integer("calls", p.calls, true));
  VT_RETURN_IF_ERROR(f.strings("path", path, true));
  if (path.size() > 64) return f.problem("path", "longer than 64 hashes");
  for (const std::string& h : path) {
    VT_ASSIGN_OR_RETURN(Digest d, digest_from_hex(h, where + ": path"));
    p.path.push_back(d);
  }
  return p;
}

nlohmann::json records_to_json(const std::vector<SignedRecord>& records) {
  nlohmann::json out = nlohmann::json::array();
  for (const SignedRecord& r : records) {
    const Bytes line = encode_record(r);
    out.push_back(std::string(line.begin(), line.end() - 1));  // without its newline
  }
  return out;
}

// The provider's commitments of epochs E - 1 and E, each signed by the key that signed the
// trace and of its task, the second chained to the first; none at all is allowed (evidence made
// without the log at hand).
Result<std::vector<SignedRecord>> records_from_json(const nlohmann::json& j,
                                                    const OperatorEvidence& e,
                                                    const std::string& where) {
  if (!j.is_array() || (!j.empty() && j.size() != 2))
    return invalid_input(where + ": expected the two records of epochs E - 1 and E, or none");
  std::vector<SignedRecord> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!j[i].is_string()) return invalid_input(at + ": expected a log line");
    const std::string line = j[i].get<std::string>() + "\n";
    VT_ASSIGN_OR_RETURN(SignedRecord r, decode_record(as_bytes(line), at));
    const std::uint64_t epoch = e.header.epoch - 1 + i;
    if (auto checked = verify_record(r, epoch, e.header.task_id, r.record.prev, e.provider, at);
        !checked)
      return rejected(checked.error().message);
    out.push_back(std::move(r));
  }
  if (out.size() == 2 && out[1].record.prev != out[0].hash)
    return rejected(where + ": the record of epoch " + std::to_string(e.header.epoch) +
                    " does not chain to the one of epoch " + std::to_string(e.header.epoch - 1));
  return out;
}

// The disputed value, when the evidence names one: an output of the call and a value of it.
Status disputed_from_json(const nlohmann::json& body, OperatorEvidence& e,
                          const std::string& where) {
  if (!body.contains("disputed")) return {};
  const std::string at = where + ": disputed";
  if (!body["disputed"].is_object()) return invalid_input(at + ": expected an object");
  JsonFields f(body["disputed"], at);
  VT_RETURN_IF_ERROR(f.known_keys({"output", "index"}));
  DisputedValue d;
  VT_RETURN_IF_ERROR(f.string("output", d.output, true));
  VT_RETURN_IF_ERROR(f.integer("index", d.index, true));
  const auto it = std::find_if(e.call.outputs.begin(), e.call.outputs.end(),
                               [&](const OperandHash& o) { return o.name == d.output; });
  if (it == e.call.outputs.end()) return f.problem("output", "names no output of the call");
  if (d.index < 0 || d.index >= it->count)
    return f.problem("index", "is not a value of output " + d.output + " (" +
                                  std::to_string(it->count) + " values)");
  e.disputed = std::move(d);
  return {};
}

}  // namespace

std::string_view departure_kind_name(Departure::Kind kind) {
  switch (kind) {
    case Departure::Kind::kOperator:
      return "operator";
    case Departure::Kind::kUntraced:
      return "untraced";
    case Departure::Kind::kStructure:
      return "structure";
    case Departure::Kind::kLength:
      return "length";
  }
  return "operator";
}

std::optional<Departure> first_departure(const StepTrace& auditor, const StepTrace& provider) {
  const std::size_t common = std::min(auditor.calls.size(), provider.calls.size());
  for (std::size_t i = 0; i < common; ++i) {
    const TracedCall& mine = auditor.calls[i];
    const TracedCall& theirs = provider.calls[i];
    if (mine == theirs) continue;
    const auto index = static_cast<std::int64_t>(i);
    if (mine.op != theirs.op || mine.params != theirs.params) {
      return Departure{Departure::Kind::kStructure, index,
                       call_words(index, theirs) + ": the provider traced another operator or " +
                           "other parameters than the documented step calls here (" +
                           call_words(index, mine) + ")"};
    }
    if (!same_inputs(mine, theirs)) {
      return Departure{Departure::Kind::kUntraced, index,
                       call_words(index, theirs) + " reads other inputs than the replay, though " +
                           "every earlier call agrees: the difference arose outside the traced " +
                           "operators"};
    }
    return Departure{Departure::Kind::kOperator, index,
                     call_words(index, theirs) +
                         ": the same inputs as the replay, other outputs: this operator is the "
                         "dispute"};
  }
  if (auditor.calls.size() != provider.calls.size()) {
    return Departure{Departure::Kind::kLength, static_cast<std::int64_t>(common),
                     "the provider's trace has " + std::to_string(provider.calls.size()) +
                         " calls, the replay " + std::to_string(auditor.calls.size())};
  }
  return std::nullopt;
}

std::string write_operator_evidence(const OperatorEvidence& e, const SigningKey& auditor) {
  nlohmann::json body = {{"format", std::string(kEvidenceFormat)},
                         {"header", header_to_json(e.header)},
                         {"provider", hex_encode(e.provider.raw())},
                         {"provider_signature", hex_encode(e.provider_signature)},
                         {"call", call_to_json(e.proof.index, e.call)},
                         {"proof", proof_to_json(e.proof)},
                         {"auditor_calls_root", hex_encode(e.auditor_calls_root)},
                         {"place", e.place},
                         {"records", records_to_json(e.records)}};
  // Moved in: an initializer list would copy the megabytes of values once more.
  body["inputs"] = evidence_operands_to_json(e.inputs, e.input_chunks);
  body["outputs"] = evidence_operands_to_json(e.outputs, e.output_chunks);
  if (e.disputed) body["disputed"] = {{"output", e.disputed->output}, {"index", e.disputed->index}};
  // The body is most of the file (the operands' values): written once, signed, and placed in the
  // document as canonical_json would place it (keys in order: evidence, signature, signer).
  const std::string body_text = canonical_json(body);
  return "{\"evidence\":" + body_text + ",\"signature\":\"" +
         hex_encode(auditor.sign(as_bytes(body_text))) + "\",\"signer\":\"" +
         hex_encode(auditor.public_key().raw()) + "\"}\n";
}

Result<CheckedEvidence> read_operator_evidence(std::string_view text, const std::string& where) {
  VT_ASSIGN_OR_RETURN(nlohmann::json doc, parse_json(text, where));
  if (!doc.is_object()) return invalid_input(where + ": expected an object");
  JsonFields top(doc, where);
  VT_RETURN_IF_ERROR(top.known_keys({"evidence", "signature", "signer"}));
  std::string signature_hex, signer_hex;
  VT_RETURN_IF_ERROR(top.string("signature", signature_hex, true));
  VT_RETURN_IF_ERROR(top.string("signer", signer_hex, true));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* body, top.find("evidence", true, "an object"));
  if (!body->is_object()) return top.wrong("evidence", "an object", *body);
  VT_ASSIGN_OR_RETURN(Bytes signer_raw, hex_decode(signer_hex));
  VT_ASSIGN_OR_RETURN(PublicKey auditor, PublicKey::from_raw(signer_raw));
  VT_ASSIGN_OR_RETURN(Bytes signature, hex_decode(signature_hex));
  if (!auditor.verify(as_bytes(canonical_json(*body)), signature))
    return rejected(where +
                    ": the auditor's signature does not cover this content (edited after "
                    "signing?)");

  const std::string at = where + ": evidence";
  JsonFields f(*body, at);
  VT_RETURN_IF_ERROR(
      f.known_keys({"format", "header", "provider", "provider_signature", "call", "proof", "inputs",
                    "outputs", "disputed", "auditor_calls_root", "place", "records"}));
  std::string format, provider_hex, provider_sig_hex, auditor_root;
  CheckedEvidence out{{}, auditor.fingerprint()};
  OperatorEvidence& e = out.evidence;
  VT_RETURN_IF_ERROR(f.string("format", format, true));
  if (format != kEvidenceFormat)
    return f.problem("format", "expected \"" + std::string(kEvidenceFormat) + "\"");
  VT_ASSIGN_OR_RETURN(const nlohmann::json* header, f.find("header", true, "an object"));
  VT_ASSIGN_OR_RETURN(e.header, header_from_json(*header, at + ": header"));
  VT_RETURN_IF_ERROR(f.string("provider", provider_hex, true));
  VT_RETURN_IF_ERROR(f.string("provider_signature", provider_sig_hex, true));
  VT_ASSIGN_OR_RETURN(Bytes provider_raw, hex_decode(provider_hex));
  VT_ASSIGN_OR_RETURN(e.provider, PublicKey::from_raw(provider_raw));
  VT_ASSIGN_OR_RETURN(e.provider_signature, hex_decode(provider_sig_hex));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* proof, f.find("proof", true, "an object"));
  VT_ASSIGN_OR_RETURN(e.proof, proof_from_json(*proof, at + ": proof"));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* call, f.find("call", true, "an object"));
  VT_ASSIGN_OR_RETURN(e.call, call_from_json(*call, e.proof.index, at + ": call"));
  VT_RETURN_IF_ERROR(disputed_from_json(*body, e, at));
  VT_RETURN_IF_ERROR(f.string("auditor_calls_root", auditor_root, true));
  VT_ASSIGN_OR_RETURN(e.auditor_calls_root,
                      digest_from_hex(auditor_root, at + ": auditor_calls_root"));
  VT_RETURN_IF_ERROR(f.string("place", e.place, true));
  if (e.place.size() > 1024) return f.problem("place", "longer than 1024 characters");
  if (body->contains("records")) {
    VT_ASSIGN_OR_RETURN(e.records, records_from_json((*body)["records"], e, at + ": records"));
  }

  // What the provider signed, and that this call is in it.
  if (!e.provider.verify(as_bytes(canonical_json(*header)), e.provider_signature))
    return rejected(at + ": the provider's signature does not cover the trace header");
  if (e.proof.calls != e.header.calls)
    return rejected(at + ": the proof is for a trace of " + std::to_string(e.proof.calls) +
                    " calls; the signed header has " + std::to_string(e.header.calls));
  if (!verify_call(e.header.calls_root, e.call, e.proof))
    return rejected(at + ": call " + std::to_string(e.proof.index) +
                    " is not in the provider's signed trace (its proof does not reach calls_root)");
  // The values, each against the root the provider signed for it in this call.
  const std::string what = at + ": " + call_words(e.proof.index, e.call);
  std::uint64_t budget = kPartialOperandBudget;
  VT_ASSIGN_OR_RETURN(const nlohmann::json* inputs, f.find("inputs", true, "an array"));
  VT_ASSIGN_OR_RETURN(e.inputs, evidence_operands_from_json(*inputs, e.call.inputs, e.input_chunks,
                                                            budget, what + ": inputs"));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* outputs, f.find("outputs", true, "an array"));
  VT_ASSIGN_OR_RETURN(e.outputs,
                      evidence_operands_from_json(*outputs, e.call.outputs, e.output_chunks, budget,
                                                  what + ": outputs"));
  const auto partial = [](const std::vector<OperandChunks>& c) {
    return std::any_of(c.begin(), c.end(), [](const OperandChunks& o) { return !o.whole; });
  };
  if (!e.disputed && (partial(e.input_chunks) || partial(e.output_chunks)))
    return invalid_input(what + ": operands are given in part, but no disputed value is named");
  return out;
}

namespace {

std::string where_words(const OperatorEvidence& e) {
  return "in step " + std::to_string(e.header.step) + " of epoch " +
         std::to_string(e.header.epoch) + ", " + call_words(e.proof.index, e.call) +
         (e.place.empty() ? "" : ", " + e.place);
}

float f32_at(const OperandValues& v, std::int64_t i) {
  float x = 0;
  std::memcpy(&x, v.bytes.data() + static_cast<std::size_t>(i) * sizeof(float), sizeof(float));
  return x;
}

// batch_norm_train's y value `index` from the call's own x, weight, bias, mean and invstd.
Result<float> batch_norm_y(const OperatorEvidence& e, std::int64_t index) {
  std::int64_t channels = 0, spatial = 0, relu = 0;
  for (const TracedParam& p : e.call.params) {
    if (p.name == "channels") channels = p.integer;
    if (p.name == "spatial") spatial = p.integer;
    if (p.name == "relu") relu = p.integer;
  }
  const auto named = [](const std::vector<OperandValues>& list,
                        std::string_view name) -> const OperandValues* {
    for (const OperandValues& v : list)
      if (v.name == name && v.dtype == DType::kF32) return &v;
    return nullptr;
  };
  const OperandValues *x = named(e.inputs, "x"), *w = named(e.inputs, "weight"),
                      *b = named(e.inputs, "bias"), *mean = named(e.outputs, "mean"),
                      *invstd = named(e.outputs, "invstd");
  if (channels <= 0 || spatial <= 0 || x == nullptr || mean == nullptr || invstd == nullptr)
    return invalid_input("batch_norm_train: the parameters or operands do not fit");
  const std::int64_t c = index / spatial % channels;
  const auto has = [](const OperandValues* v, std::int64_t i) {
    return v != nullptr && static_cast<std::int64_t>(v->bytes.size() / sizeof(float)) > i;
  };
  if (!has(x, index) || !has(mean, c) || !has(invstd, c))
    return invalid_input("batch_norm_train: the parameters or operands do not fit");
  return kernels::batch_norm_value(f32_at(*x, index), f32_at(*mean, c), f32_at(*invstd, c),
                                   has(w, c) ? f32_at(*w, c) : 1.0f,
                                   has(b, c) ? f32_at(*b, c) : 0.0f, relu != 0);
}

// The ruling on evidence that names one disputed value: the values that value reads must all be
// given (dispute/cone.h); only it is recomputed and compared.
Result<Ruling> rule_one_value(const OperatorEvidence& e) {
  const DisputedValue& d = *e.disputed;
  std::size_t o = 0;
  while (o < e.call.outputs.size() && e.call.outputs[o].name != d.output) ++o;
  if (o == e.call.outputs.size() || o >= e.outputs.size())
    return invalid_input("the disputed value names no output of the call");
  const auto cone = value_cone(e.call, o, d.index);
  if (!cone)
    return invalid_input(
        e.call.op + " is refereed on whole operands only, or its parameters " +
        "do not fit its operands: evidence for one value of it cannot be ruled on");
  const auto given = [&](bool output, std::size_t operand, std::int64_t begin, std::int64_t end) {
    const auto& chunks = output ? e.output_chunks : e.input_chunks;
    const auto& values = output ? e.outputs : e.inputs;
    return operand >= chunks.size() || gives(chunks[operand], values[operand].dtype, begin, end);
  };
  if (!given(true, o, d.index, d.index + 1))
    return invalid_input("the evidence does not give the disputed value " + d.output + "[" +
                         std::to_string(d.index) + "] itself");
  for (const ValueSpan& span : *cone) {
    if (!given(span.output, span.operand, span.begin, span.end)) {
      const auto& list = span.output ? e.call.outputs : e.call.inputs;
      return invalid_input("the evidence does not give " + list[span.operand].name + "[" +
                           std::to_string(span.begin) + ", " + std::to_string(span.end) +
                           "), which the disputed value " + d.output + "[" +
                           std::to_string(d.index) + "] is computed from");
    }
  }
  const OperandValues& claimed = e.outputs[o];
  OperandValues documented{claimed.name, claimed.dtype, {}};
  if (computed_from_outputs(e.call, o)) {
    VT_ASSIGN_OR_RETURN(const float y, batch_norm_y(e, d.index));
    documented.bytes.resize(claimed.bytes.size());
    std::memcpy(documented.bytes.data() + static_cast<std::size_t>(d.index) * sizeof(float), &y,
                sizeof(float));
  } else {
    VT_ASSIGN_OR_RETURN(std::vector<OperandValues> recomputed, recompute(e.call, e.inputs));
    if (o >= recomputed.size() || recomputed[o].bytes.size() != claimed.bytes.size())
      return invalid_input("the recomputed " + d.output + " does not have the signed size");
    documented = std::move(recomputed[o]);
  }
  const std::size_t width = dtype_bytes(claimed.dtype);
  const std::size_t at = static_cast<std::size_t>(d.index) * width;
  Ruling r;
  r.op = e.call.op;
  r.call = e.proof.index;
  const std::string value = d.output + "[" + std::to_string(d.index) + "]";
  r.provider_correct =
      std::memcmp(documented.bytes.data() + at, claimed.bytes.data() + at, width) == 0;
  const std::string reads = computed_from_outputs(e.call, o)
                                ? "the inputs and the channel's mean and invstd it signed"
                                : "the inputs it signed";
  if (r.provider_correct) {
    r.summary = "for the provider: " + where_words(e) + " - the disputed value " + value +
                " is what the documented arithmetic gives on " + reads;
  } else {
    r.differing_outputs.push_back(value + " (the one value in dispute)");
    const auto i = static_cast<std::size_t>(d.index);
    r.examples.push_back({d.output, d.index, value_at(claimed, i), value_at(documented, i)});
    r.summary = "against the provider: " + where_words(e) + " - given " + reads +
                ", the documented arithmetic gives another " + value + " than it signed";
  }
  return r;
}

}  // namespace

Result<Ruling> rule(const OperatorEvidence& e) {
  if (e.disputed) return rule_one_value(e);
  VT_ASSIGN_OR_RETURN(std::vector<OperandValues> recomputed, recompute(e.call, e.inputs));
  Ruling r;
  r.op = e.call.op;
  r.call = e.proof.index;
  for (std::size_t i = 0; i < recomputed.size() && i < e.outputs.size(); ++i) {
    const std::int64_t differ = differing_values(recomputed[i], e.outputs[i], r.examples);
    if (differ > 0)
      r.differing_outputs.push_back(
          e.outputs[i].name + " (" + std::to_string(differ) + " of " +
          std::to_string(e.outputs[i].bytes.size() / dtype_bytes(e.outputs[i].dtype)) + " values)");
  }
  r.provider_correct = r.differing_outputs.empty() && recomputed.size() == e.outputs.size();
  const std::string where = where_words(e);
  if (r.provider_correct) {
    r.summary = "for the provider: " + where +
                " - its outputs are what the documented arithmetic gives on its inputs";
  } else {
    std::string list;
    for (const std::string& d : r.differing_outputs) list += (list.empty() ? "" : ", ") + d;
    r.summary = "against the provider: " + where + " - given the inputs it signed, the " +
                "documented arithmetic gives other outputs than it signed: " + list;
  }
  return r;
}

namespace {
nlohmann::json examples_json(const std::vector<ValueDifference>& examples) {
  nlohmann::json out = nlohmann::json::array();
  for (const ValueDifference& d : examples)
    out.push_back({{"output", d.output},
                   {"index", d.index},
                   {"provider", d.provider},
                   {"documented", d.documented}});
  return out;
}
}  // namespace

nlohmann::json ruling_to_json(const Ruling& r, const OperatorEvidence& e) {
  return {{"ruling", r.provider_correct ? "provider_correct" : "provider_wrong"},
          {"operator", r.op},
          {"call", r.call},
          {"epoch", e.header.epoch},
          {"step", e.header.step},
          {"task_id", hex_encode(e.header.task_id)},
          {"provider", e.provider.fingerprint()},
          {"differing_outputs", r.differing_outputs},
          {"examples", examples_json(r.examples)},
          {"place", e.place},
          {"summary", r.summary}};
}

}  // namespace vt::dispute
