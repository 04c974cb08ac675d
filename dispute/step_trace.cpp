#include "dispute/step_trace.h"

#include <bit>
#include <cstring>

#include "common/json.h"
#include "common/json_fields.h"
#include "fingerprint/merkle.h"
#include "kernels/parallel.h"

namespace vt::dispute {
namespace {

// Operands are hashed as they lie in memory: the canonical order is little-endian.
static_assert(std::endian::native == std::endian::little,
              "step traces hash operands in memory order, which must be little-endian");

constexpr std::size_t kMaxNameLength = 64;

Result<DType> dtype_named(const std::string& name, const std::string& where) {
  if (name == "f32") return DType::kF32;
  if (name == "i64") return DType::kI64;
  return invalid_input(where + ": dtype: expected \"f32\" or \"i64\", got \"" +
                       name.substr(0, kMaxNameLength) + "\"");
}

nlohmann::json operand_to_json(const OperandHash& o) {
  return {{"name", o.name},
          {"dtype", std::string(dtype_name(o.dtype))},
          {"count", o.count},
          {"root", hex_encode(o.root)}};
}

Result<OperandHash> operand_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return invalid_input(where + ": expected an object");
  JsonFields f(j, where);
  VT_RETURN_IF_ERROR(f.known_keys({"name", "dtype", "count", "root"}));
  OperandHash o;
  std::string dtype, hash;
  VT_RETURN_IF_ERROR(f.string("name", o.name, true));
  VT_RETURN_IF_ERROR(f.string("dtype", dtype, true));
  VT_RETURN_IF_ERROR(f.integer("count", o.count, true));
  VT_RETURN_IF_ERROR(f.string("root", hash, true));
  if (o.name.size() > kMaxNameLength) return f.problem("name", "longer than 64 characters");
  if (o.count < 0) return f.problem("count", "negative");
  VT_ASSIGN_OR_RETURN(o.dtype, dtype_named(dtype, where));
  VT_ASSIGN_OR_RETURN(o.root, digest_from_hex(hash, where + ": root"));
  return o;
}

Result<std::vector<OperandHash>> operands_from_json(const nlohmann::json& j,
                                                    const std::string& where) {
  if (!j.is_array() || j.size() > kMaxCallOperands)
    return invalid_input(where + ": expected an array of at most 64 operands");
  std::vector<OperandHash> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    VT_ASSIGN_OR_RETURN(OperandHash o,
                        operand_from_json(j[i], where + "[" + std::to_string(i) + "]"));
    out.push_back(std::move(o));
  }
  return out;
}

ByteSpan operand_bytes(const kernels::trace::Operand& o) {
  if (o.count <= 0 || (o.f32 == nullptr && o.i64 == nullptr)) return {};
  const void* data = o.f32 != nullptr ? static_cast<const void*>(o.f32) : o.i64;
  const std::size_t width = o.f32 != nullptr ? sizeof(float) : sizeof(std::int64_t);
  return ByteSpan(static_cast<const std::uint8_t*>(data),
                  static_cast<std::size_t>(o.count) * width);
}

OperandValues operand_values(const kernels::trace::Operand& o) {
  OperandValues v{std::string(o.name), o.i64 != nullptr ? DType::kI64 : DType::kF32, {}};
  if (o.count > 0 && (o.f32 != nullptr || o.i64 != nullptr)) {
    const auto* data = o.f32 != nullptr ? reinterpret_cast<const std::uint8_t*>(o.f32)
                                        : reinterpret_cast<const std::uint8_t*>(o.i64);
    v.bytes.assign(data, data + static_cast<std::size_t>(o.count) * dtype_bytes(v.dtype));
  }
  return v;
}

// RFC 6962's tree over leaf hashes [lo, hi).
Digest subtree(const std::vector<Digest>& leaves, std::size_t lo, std::size_t hi) {
  if (hi - lo == 1) return leaves[lo];
  std::size_t k = 1;
  while (k * 2 < hi - lo) k *= 2;
  return fp::merkle_node_hash(subtree(leaves, lo, lo + k), subtree(leaves, lo + k, hi));
}

void audit_path(const std::vector<Digest>& leaves, std::size_t m, std::size_t lo, std::size_t hi,
                std::vector<Digest>& path) {
  if (hi - lo == 1) return;
  std::size_t k = 1;
  while (k * 2 < hi - lo) k *= 2;
  if (m < lo + k) {
    audit_path(leaves, m, lo, lo + k, path);
    path.push_back(subtree(leaves, lo + k, hi));
  } else {
    audit_path(leaves, m, lo + k, hi, path);
    path.push_back(subtree(leaves, lo, lo + k));
  }
}

// The root from a leaf and its path, consumed from the top (the path's end) down.
std::optional<Digest> root_from_path(const Digest& leaf, std::size_t m, std::size_t lo,
                                     std::size_t hi, std::vector<Digest>& path) {
  if (hi - lo == 1) return leaf;
  if (path.empty()) return std::nullopt;
  std::size_t k = 1;
  while (k * 2 < hi - lo) k *= 2;
  const Digest sibling = path.back();
  path.pop_back();
  if (m < lo + k) {
    auto left = root_from_path(leaf, m, lo, lo + k, path);
    if (!left) return std::nullopt;
    return fp::merkle_node_hash(*left, sibling);
  }
  auto right = root_from_path(leaf, m, lo + k, hi, path);
  if (!right) return std::nullopt;
  return fp::merkle_node_hash(sibling, *right);
}

}  // namespace

Digest operand_root(ByteSpan bytes) { return fp::merkle_root(bytes, kOperandChunkBytes); }

std::string_view dtype_name(DType d) { return d == DType::kI64 ? "i64" : "f32"; }
std::size_t dtype_bytes(DType d) { return d == DType::kI64 ? 8 : 4; }

bool TracedParam::operator==(const TracedParam& o) const {
  return name == o.name && is_real == o.is_real && integer == o.integer &&
         std::bit_cast<std::uint32_t>(real) == std::bit_cast<std::uint32_t>(o.real);
}

nlohmann::json call_to_json(std::int64_t index, const TracedCall& call) {
  nlohmann::json params = nlohmann::json::array();
  for (const TracedParam& p : call.params) {
    if (p.is_real) {
      params.push_back({{"name", p.name}, {"f32", static_cast<double>(p.real)}});
    } else {
      params.push_back({{"name", p.name}, {"int", p.integer}});
    }
  }
  nlohmann::json inputs = nlohmann::json::array(), outputs = nlohmann::json::array();
  for (const OperandHash& o : call.inputs) inputs.push_back(operand_to_json(o));
  for (const OperandHash& o : call.outputs) outputs.push_back(operand_to_json(o));
  return {{"index", index},
          {"op", call.op},
          {"params", params},
          {"inputs", inputs},
          {"outputs", outputs}};
}

Result<TracedCall> call_from_json(const nlohmann::json& j, std::int64_t expected_index,
                                  const std::string& where) {
  if (!j.is_object()) return invalid_input(where + ": expected an object");
  JsonFields f(j, where);
  VT_RETURN_IF_ERROR(f.known_keys({"index", "op", "params", "inputs", "outputs"}));
  std::int64_t index = -1;
  TracedCall call;
  VT_RETURN_IF_ERROR(f.integer("index", index, true));
  if (index != expected_index)
    return f.problem("index", "is " + std::to_string(index) + ", expected " +
                                  std::to_string(expected_index) + " (calls are in order)");
  VT_RETURN_IF_ERROR(f.string("op", call.op, true));
  if (call.op.size() > kMaxNameLength) return f.problem("op", "longer than 64 characters");
  VT_ASSIGN_OR_RETURN(const nlohmann::json* params, f.find("params", true, "an array"));
  if (!params->is_array() || params->size() > kMaxCallParams)
    return f.wrong("params", "an array of at most 64 parameters", *params);
  for (std::size_t i = 0; i < params->size(); ++i) {
    const std::string at = where + ": params[" + std::to_string(i) + "]";
    if (!(*params)[i].is_object()) return invalid_input(at + ": expected an object");
    JsonFields pf((*params)[i], at);
    VT_RETURN_IF_ERROR(pf.known_keys({"name", "int", "f32"}));
    TracedParam p;
    VT_RETURN_IF_ERROR(pf.string("name", p.name, true));
    if (p.name.size() > kMaxNameLength) return pf.problem("name", "longer than 64 characters");
    if (pf.value().contains("f32")) {
      double d = 0;
      VT_RETURN_IF_ERROR(pf.number("f32", d, true));
      p.real = static_cast<float>(d);
      p.is_real = true;
      if (static_cast<double>(p.real) != d) return pf.problem("f32", "is not a binary32 value");
    } else {
      VT_RETURN_IF_ERROR(pf.integer("int", p.integer, true));
    }
    call.params.push_back(std::move(p));
  }
  VT_ASSIGN_OR_RETURN(const nlohmann::json* inputs, f.find("inputs", true, "an array"));
  VT_ASSIGN_OR_RETURN(call.inputs, operands_from_json(*inputs, where + ": inputs"));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* outputs, f.find("outputs", true, "an array"));
  VT_ASSIGN_OR_RETURN(call.outputs, operands_from_json(*outputs, where + ": outputs"));
  return call;
}

Digest call_leaf(std::int64_t index, const TracedCall& call) {
  return fp::merkle_leaf_hash(as_bytes(canonical_json(call_to_json(index, call))));
}

Digest calls_root(const std::vector<TracedCall>& calls) {
  if (calls.empty()) return sha256(ByteSpan());
  std::vector<Digest> leaves;
  leaves.reserve(calls.size());
  for (std::size_t i = 0; i < calls.size(); ++i)
    leaves.push_back(call_leaf(static_cast<std::int64_t>(i), calls[i]));
  return subtree(leaves, 0, leaves.size());
}

CallProof prove_call(const std::vector<TracedCall>& calls, std::int64_t index) {
  std::vector<Digest> leaves;
  for (std::size_t i = 0; i < calls.size(); ++i)
    leaves.push_back(call_leaf(static_cast<std::int64_t>(i), calls[i]));
  CallProof proof{index, static_cast<std::int64_t>(calls.size()), {}};
  audit_path(leaves, static_cast<std::size_t>(index), 0, leaves.size(), proof.path);
  return proof;
}

bool verify_call(const Digest& root, const TracedCall& call, const CallProof& proof) {
  if (proof.calls <= 0 || proof.calls > kMaxTraceCalls || proof.index < 0 ||
      proof.index >= proof.calls || proof.path.size() > 64)
    return false;
  std::vector<Digest> path = proof.path;
  auto computed =
      root_from_path(call_leaf(proof.index, call), static_cast<std::size_t>(proof.index), 0,
                     static_cast<std::size_t>(proof.calls), path);
  return computed && path.empty() && *computed == root;
}

nlohmann::json header_to_json(const TraceHeader& h) {
  return {{"format", "veritrain/step-trace/v2"},
          {"task_id", hex_encode(h.task_id)},
          {"epoch", h.epoch},
          {"step", h.step},
          {"calls", h.calls},
          {"calls_root", hex_encode(h.calls_root)}};
}

Result<TraceHeader> header_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return invalid_input(where + ": expected an object");
  JsonFields f(j, where);
  VT_RETURN_IF_ERROR(f.known_keys({"format", "task_id", "epoch", "step", "calls", "calls_root"}));
  std::string format, task, root;
  TraceHeader h;
  VT_RETURN_IF_ERROR(f.string("format", format, true));
  if (format != "veritrain/step-trace/v2")
    return f.problem("format", "expected \"veritrain/step-trace/v2\"");
  VT_RETURN_IF_ERROR(f.string("task_id", task, true));
  VT_RETURN_IF_ERROR(f.unsigned64("epoch", h.epoch, true));
  VT_RETURN_IF_ERROR(f.integer("step", h.step, true));
  VT_RETURN_IF_ERROR(f.integer("calls", h.calls, true));
  VT_RETURN_IF_ERROR(f.string("calls_root", root, true));
  if (h.step < 1) return f.problem("step", "must be 1 or more");
  if (h.calls < 0 || h.calls > kMaxTraceCalls) return f.problem("calls", "out of range");
  VT_ASSIGN_OR_RETURN(h.task_id, digest_from_hex(task, where + ": task_id"));
  VT_ASSIGN_OR_RETURN(h.calls_root, digest_from_hex(root, where + ": calls_root"));
  return h;
}

std::string write_signed_trace(const StepTrace& trace, const SigningKey& key) {
  const nlohmann::json header = header_to_json(trace.header);
  nlohmann::json calls = nlohmann::json::array();
  for (std::size_t i = 0; i < trace.calls.size(); ++i)
    calls.push_back(call_to_json(static_cast<std::int64_t>(i), trace.calls[i]));
  const nlohmann::json doc = {{"header", header},
                              {"signature", hex_encode(key.sign(as_bytes(canonical_json(header))))},
                              {"signer", hex_encode(key.public_key().raw())},
                              {"calls", calls}};
  return canonical_json(doc) + "\n";
}

Result<SignedTrace> read_signed_trace(std::string_view text, const std::string& where) {
  VT_ASSIGN_OR_RETURN(nlohmann::json doc, parse_json(text, where));
  if (!doc.is_object()) return invalid_input(where + ": expected an object");
  JsonFields f(doc, where);
  VT_RETURN_IF_ERROR(f.known_keys({"header", "signature", "signer", "calls"}));
  std::string signature_hex, signer_hex;
  VT_RETURN_IF_ERROR(f.string("signature", signature_hex, true));
  VT_RETURN_IF_ERROR(f.string("signer", signer_hex, true));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* header, f.find("header", true, "an object"));
  VT_ASSIGN_OR_RETURN(TraceHeader h, header_from_json(*header, where + ": header"));
  VT_ASSIGN_OR_RETURN(Bytes signer_raw, hex_decode(signer_hex));
  VT_ASSIGN_OR_RETURN(PublicKey signer, PublicKey::from_raw(signer_raw));
  VT_ASSIGN_OR_RETURN(Bytes signature, hex_decode(signature_hex));
  if (!signer.verify(as_bytes(canonical_json(*header)), signature))
    return rejected(where + ": the signature does not cover the header (edited after signing?)");
  VT_ASSIGN_OR_RETURN(const nlohmann::json* calls, f.find("calls", true, "an array"));
  if (!calls->is_array() || static_cast<std::int64_t>(calls->size()) != h.calls)
    return rejected(where + ": the header signs " + std::to_string(h.calls) +
                    " calls; the trace holds " +
                    (calls->is_array() ? std::to_string(calls->size()) : "none"));
  SignedTrace out{{h, {}}, std::move(signer), std::move(signature)};
  for (std::size_t i = 0; i < calls->size(); ++i) {
    VT_ASSIGN_OR_RETURN(TracedCall c, call_from_json((*calls)[i], static_cast<std::int64_t>(i),
                                                     where + ": calls[" + std::to_string(i) + "]"));
    out.trace.calls.push_back(std::move(c));
  }
  if (calls_root(out.trace.calls) != h.calls_root)
    return rejected(where + ": the calls do not hash to the signed calls_root");
  return out;
}

nlohmann::json values_to_json(const std::vector<OperandValues>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (const OperandValues& v : values)
    out.push_back({{"name", v.name},
                   {"dtype", std::string(dtype_name(v.dtype))},
                   {"base64", base64_encode(v.bytes)}});
  return out;
}

Result<std::vector<OperandValues>> values_from_json(const nlohmann::json& j,
                                                    const std::string& where) {
  if (!j.is_array() || j.size() > kMaxCallOperands)
    return invalid_input(where + ": expected an array of at most 64 operands");
  std::vector<OperandValues> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!j[i].is_object()) return invalid_input(at + ": expected an object");
    JsonFields f(j[i], at);
    VT_RETURN_IF_ERROR(f.known_keys({"name", "dtype", "base64"}));
    OperandValues v;
    std::string dtype, text;
    VT_RETURN_IF_ERROR(f.string("name", v.name, true));
    VT_RETURN_IF_ERROR(f.string("dtype", dtype, true));
    VT_RETURN_IF_ERROR(f.string("base64", text, true));
    VT_ASSIGN_OR_RETURN(v.dtype, dtype_named(dtype, at));
    auto bytes = base64_decode(text);
    if (!bytes) return f.problem("base64", bytes.error().message);
    v.bytes = std::move(*bytes);
    if (v.bytes.size() % dtype_bytes(v.dtype) != 0)
      return f.problem("base64", "holds a partial " + std::string(dtype_name(v.dtype)) + " value");
    out.push_back(std::move(v));
  }
  return out;
}

std::string write_call_values(const TraceHeader& header, const CallValues& values) {
  return canonical_json({{"format", "veritrain/call-values/v1"},
                         {"task_id", hex_encode(header.task_id)},
                         {"epoch", header.epoch},
                         {"step", header.step},
                         {"index", values.index},
                         {"inputs", values_to_json(values.inputs)},
                         {"outputs", values_to_json(values.outputs)}}) +
         "\n";
}

Result<CallValues> read_call_values(std::string_view text, const std::string& where,
                                    const TraceHeader& header) {
  // Operands of up to 2^28 values, in hex: the file may be large, but never unbounded.
  VT_ASSIGN_OR_RETURN(nlohmann::json doc, parse_json(text, where));
  if (!doc.is_object()) return invalid_input(where + ": expected an object");
  JsonFields f(doc, where);
  VT_RETURN_IF_ERROR(
      f.known_keys({"format", "task_id", "epoch", "step", "index", "inputs", "outputs"}));
  std::string format, task;
  std::uint64_t epoch = 0;
  std::int64_t step = 0;
  CallValues v;
  VT_RETURN_IF_ERROR(f.string("format", format, true));
  if (format != "veritrain/call-values/v1")
    return f.problem("format", "expected \"veritrain/call-values/v1\"");
  VT_RETURN_IF_ERROR(f.string("task_id", task, true));
  VT_RETURN_IF_ERROR(f.unsigned64("epoch", epoch, true));
  VT_RETURN_IF_ERROR(f.integer("step", step, true));
  VT_RETURN_IF_ERROR(f.integer("index", v.index, true));
  VT_ASSIGN_OR_RETURN(Digest id, digest_from_hex(task, where + ": task_id"));
  if (id != header.task_id || epoch != header.epoch || step != header.step)
    return invalid_input(where + ": the values are for task " + task.substr(0, 64) + ", epoch " +
                         std::to_string(epoch) + ", step " + std::to_string(step) +
                         "; the trace is of epoch " + std::to_string(header.epoch) + ", step " +
                         std::to_string(header.step) + " of task " + hex_encode(header.task_id));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* inputs, f.find("inputs", true, "an array"));
  VT_ASSIGN_OR_RETURN(v.inputs, values_from_json(*inputs, where + ": inputs"));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* outputs, f.find("outputs", true, "an array"));
  VT_ASSIGN_OR_RETURN(v.outputs, values_from_json(*outputs, where + ": outputs"));
  return v;
}

Status check_values(const std::vector<OperandValues>& values,
                    const std::vector<OperandHash>& hashes, const std::string& what) {
  if (values.size() != hashes.size())
    return rejected(what + ": " + std::to_string(values.size()) +
                    " operands given, the trace has " + std::to_string(hashes.size()));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const OperandValues& v = values[i];
    const OperandHash& h = hashes[i];
    const std::int64_t count = static_cast<std::int64_t>(v.bytes.size() / dtype_bytes(v.dtype));
    if (v.name != h.name || v.dtype != h.dtype || count != h.count ||
        operand_root(v.bytes) != h.root)
      return rejected(what + " " + h.name +
                      ": the values given are not the ones the signed trace " + "hashes (" +
                      std::to_string(count) + " " + std::string(dtype_name(v.dtype)) +
                      " values given, " + std::to_string(h.count) + " traced)");
  }
  return {};
}

void TraceRecorder::record(const kernels::trace::Operand& o, bool output) {
  TracedCall& call = calls_.back();
  std::vector<OperandHash>& list = output ? call.outputs : call.inputs;
  list.push_back({std::string(o.name), o.i64 != nullptr ? DType::kI64 : DType::kF32,
                  o.f32 == nullptr && o.i64 == nullptr ? 0 : o.count, Digest{}});
  pending_.push_back({calls_.size() - 1, list.size() - 1, output, digests_.add(operand_bytes(o))});
}

void TraceRecorder::settle() {
  if (pending_.empty()) return;
  digests_.finish();
  for (std::size_t i = filled_; i < pending_.size(); ++i) {
    const Pending& p = pending_[i];
    TracedCall& call = calls_[p.call];
    (p.output ? call.outputs : call.inputs)[p.operand].root = digests_.digest(p.ticket);
  }
  pending_.clear();
  call_ends_.clear();
  filled_ = 0;
}

void TraceRecorder::compare_ready_calls() {
  // Digests complete in the order the operands came (one helper takes them from the front), so
  // this stops at the first not yet computed.
  while (filled_ < pending_.size() && digests_.ready(pending_[filled_].ticket)) {
    const Pending& p = pending_[filled_++];
    TracedCall& call = calls_[p.call];
    (p.output ? call.outputs : call.inputs)[p.operand].root = digests_.digest(p.ticket);
  }
  while (agreed_ < call_ends_.size() && call_ends_[agreed_] <= filled_ &&
         agreed_ < provider_->size()) {
    if (calls_[agreed_] == (*provider_)[agreed_]) {
      ++agreed_;
      continue;
    }
    parted_ = agreed_;
    calls_.resize(agreed_ + 1);
    pending_.resize(call_ends_[agreed_]);
    call_ends_.resize(agreed_ + 1);
    digests_.abandon();  // what is left to hash belongs to later calls
    stop_listening();
    return;
  }
}

void TraceRecorder::begin(std::string_view op, std::span<const kernels::trace::Param> params,
                          std::span<const kernels::trace::Operand> inputs) {
  if (provider_ != nullptr && !parted_) {
    compare_ready_calls();
    if (parted_ && !kernels::in_parallel()) throw StepCut();
  }
  if (parted_) return;
  TracedCall call;
  call.op = std::string(op);
  for (const auto& p : params)
    call.params.push_back({std::string(p.name), p.integer, p.real, p.is_real});
  calls_.push_back(std::move(call));
  for (const auto& o : inputs) record(o, false);
  const auto index = static_cast<std::int64_t>(calls_.size()) - 1;
  if (capture_ && *capture_ == index) {
    captured_.emplace();
    captured_->index = index;
    for (const auto& o : inputs) captured_->inputs.push_back(operand_values(o));
  }
}

void TraceRecorder::end(std::span<const kernels::trace::Operand> outputs) {
  if (calls_.empty() || parted_) return;
  for (const auto& o : outputs) record(o, true);
  call_ends_.push_back(pending_.size());
  if (captured_ && captured_->index == static_cast<std::int64_t>(calls_.size()) - 1 &&
      captured_->outputs.empty()) {
    for (const auto& o : outputs) captured_->outputs.push_back(operand_values(o));
  }
}

}  // namespace vt::dispute
