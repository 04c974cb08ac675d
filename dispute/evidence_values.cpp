#include "dispute/evidence_values.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/json_fields.h"
#include "dispute/cone.h"
#include "dispute/recompute.h"
#include "fingerprint/merkle.h"

namespace vt::dispute {
namespace {

ByteSpan chunk_bytes(const Bytes& bytes, std::uint64_t chunk) {
  const std::uint64_t begin = chunk * kOperandChunkBytes;
  return ByteSpan(bytes).subspan(begin,
                                 std::min<std::uint64_t>(kOperandChunkBytes, bytes.size() - begin));
}

// Values nobody gave: a NaN every f32 operation keeps, so a kernel that read one by mistake
// could not produce the value in dispute.
void fill_unknown(Bytes& bytes, DType dtype) {
  if (dtype == DType::kI64) {
    std::fill(bytes.begin(), bytes.end(), std::uint8_t{0});
    return;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t i = 0; i + sizeof(float) <= bytes.size(); i += sizeof(float))
    std::memcpy(bytes.data() + i, &nan, sizeof(float));
}

Result<std::vector<std::uint64_t>> chunk_list_from_json(const nlohmann::json& list,
                                                        const OperandHash& h, Bytes& bytes,
                                                        std::vector<std::vector<Digest>>& proofs,
                                                        const std::string& where) {
  const std::uint64_t count = fp::merkle_chunk_count(bytes.size(), kOperandChunkBytes);
  if (!list.is_array() || list.size() > count)
    return invalid_input(where + ": expected an array of at most " + std::to_string(count) +
                         " chunks");
  std::vector<std::uint64_t> given;
  for (std::size_t c = 0; c < list.size(); ++c) {
    const std::string at = where + "[" + std::to_string(c) + "]";
    if (!list[c].is_object()) return invalid_input(at + ": expected an object");
    JsonFields f(list[c], at);
    VT_RETURN_IF_ERROR(f.known_keys({"index", "base64", "path"}));
    std::uint64_t index = 0;
    std::string text;
    std::vector<std::string> path;
    VT_RETURN_IF_ERROR(f.unsigned64("index", index, true));
    VT_RETURN_IF_ERROR(f.string("base64", text, true));
    VT_RETURN_IF_ERROR(f.strings("path", path, true));
    if (index >= count || (!given.empty() && index <= given.back()))
      return f.problem("index", "is not a chunk of the operand after the one before it");
    if (path.size() > 64) return f.problem("path", "longer than 64 hashes");
    auto chunk = base64_decode(text);
    if (!chunk) return f.problem("base64", chunk.error().message);
    fp::InclusionProof proof{index, count, {}};
    for (const std::string& hex : path) {
      VT_ASSIGN_OR_RETURN(Digest d, digest_from_hex(hex, at + ": path"));
      proof.siblings.push_back(d);
    }
    if (!fp::verify_chunk(h.root, *chunk, proof, kOperandChunkBytes))
      return rejected(at + ": chunk " + std::to_string(index) + " of " + h.name +
                      " is not part of the values the provider signed (its proof does not reach "
                      "the operand's root)");
    std::memcpy(bytes.data() + index * kOperandChunkBytes, chunk->data(), chunk->size());
    given.push_back(index);
    proofs.push_back(std::move(proof.siblings));
  }
  return given;
}

}  // namespace

nlohmann::json evidence_operands_to_json(const std::vector<OperandValues>& values,
                                         const std::vector<OperandChunks>& chunks) {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < values.size(); ++i) {
    const OperandValues& v = values[i];
    nlohmann::json o = {{"name", v.name}, {"dtype", std::string(dtype_name(v.dtype))}};
    if (i >= chunks.size() || chunks[i].whole) {
      o["base64"] = base64_encode(v.bytes);
    } else {
      nlohmann::json list = nlohmann::json::array();
      for (std::size_t c = 0; c < chunks[i].given.size(); ++c) {
        nlohmann::json path = nlohmann::json::array();
        for (const Digest& d : chunks[i].proofs[c]) path.push_back(hex_encode(d));
        list.push_back({{"index", chunks[i].given[c]},
                        {"base64", base64_encode(chunk_bytes(v.bytes, chunks[i].given[c]))},
                        {"path", std::move(path)}});
      }
      o["chunks"] = std::move(list);
    }
    out.push_back(std::move(o));
  }
  return out;
}

Result<std::vector<OperandValues>> evidence_operands_from_json(
    const nlohmann::json& j, const std::vector<OperandHash>& signed_operands,
    std::vector<OperandChunks>& chunks, std::uint64_t& budget, const std::string& where) {
  if (!j.is_array() || j.size() != signed_operands.size())
    return invalid_input(where + ": expected an array of the call's " +
                         std::to_string(signed_operands.size()) + " operands");
  std::vector<OperandValues> out;
  chunks.assign(j.size(), OperandChunks{});
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const OperandHash& h = signed_operands[i];
    if (!j[i].is_object()) return invalid_input(at + ": expected an object");
    JsonFields f(j[i], at);
    VT_RETURN_IF_ERROR(f.known_keys({"name", "dtype", "base64", "chunks"}));
    OperandValues v;
    std::string dtype;
    VT_RETURN_IF_ERROR(f.string("name", v.name, true));
    VT_RETURN_IF_ERROR(f.string("dtype", dtype, true));
    if (v.name != h.name || dtype != dtype_name(h.dtype))
      return rejected(at + ": operand " + v.name.substr(0, 64) + " (" + dtype.substr(0, 8) +
                      ") is not the call's operand " + h.name + " (" +
                      std::string(dtype_name(h.dtype)) + ")");
    v.dtype = h.dtype;
    if (f.value().contains("base64") == f.value().contains("chunks"))
      return invalid_input(at + ": expected either base64 (every value) or chunks");
    if (f.value().contains("base64")) {
      std::string text;
      VT_RETURN_IF_ERROR(f.string("base64", text, true));
      auto bytes = base64_decode(text);
      if (!bytes) return f.problem("base64", bytes.error().message);
      v.bytes = std::move(*bytes);
      VT_RETURN_IF_ERROR(check_values({v}, {h}, at));
    } else {
      const std::uint64_t size = static_cast<std::uint64_t>(h.count) * dtype_bytes(h.dtype);
      if (size > budget)
        return invalid_input(at + ": the operand's " + std::to_string(h.count) +
                             " signed values pass what a referee allocates for evidence");
      budget -= size;
      v.bytes.resize(size);
      fill_unknown(v.bytes, v.dtype);
      chunks[i].whole = false;
      VT_ASSIGN_OR_RETURN(chunks[i].given, chunk_list_from_json(j[i]["chunks"], h, v.bytes,
                                                                chunks[i].proofs, at + ": chunks"));
    }
    out.push_back(std::move(v));
  }
  return out;
}

bool gives(const OperandChunks& chunks, DType dtype, std::int64_t begin, std::int64_t end) {
  if (chunks.whole || end <= begin) return true;
  const std::uint64_t width = dtype_bytes(dtype);
  const std::uint64_t first = static_cast<std::uint64_t>(begin) * width / kOperandChunkBytes;
  const std::uint64_t last = (static_cast<std::uint64_t>(end) * width - 1) / kOperandChunkBytes;
  auto it = std::lower_bound(chunks.given.begin(), chunks.given.end(), first);
  for (std::uint64_t c = first; c <= last; ++c, ++it)
    if (it == chunks.given.end() || *it != c) return false;
  return true;
}

OperandChunks keep_chunks(OperandValues& whole, const std::vector<std::uint64_t>& keep) {
  OperandChunks out{false, keep, {}};
  for (fp::InclusionProof& p : fp::prove_chunks(whole.bytes, keep, kOperandChunkBytes))
    out.proofs.push_back(std::move(p.siblings));
  Bytes kept(whole.bytes.size());
  fill_unknown(kept, whole.dtype);
  for (std::uint64_t c : keep) {
    const ByteSpan chunk = chunk_bytes(whole.bytes, c);
    std::memcpy(kept.data() + c * kOperandChunkBytes, chunk.data(), chunk.size());
  }
  whole.bytes = std::move(kept);
  return out;
}

namespace {

struct Candidate {
  std::size_t output = 0;
  std::int64_t index = 0;
  std::vector<ValueSpan> spans;
  std::uint64_t bytes = 0;  // about what the evidence's operands would take
};

// About what an operand takes in the evidence: whole (base64), or `kept` chunks of it, each in
// base64 with its path of hex hashes. A column of a product reads one value in each of many
// chunks: then the whole operand is the smaller, and is given.
std::uint64_t whole_cost(std::uint64_t size) { return (size + 2) / 3 * 4; }
std::uint64_t partial_cost(std::uint64_t size, std::uint64_t kept) {
  std::uint64_t depth = 0;
  for (std::uint64_t n = fp::merkle_chunk_count(size, kOperandChunkBytes); n > 1; n = (n + 1) / 2)
    ++depth;
  return kept * (whole_cost(kOperandChunkBytes) + depth * (2 * sizeof(Digest) + 3) + 40);
}
bool cheaper_whole(std::uint64_t size, std::uint64_t kept) {
  return whole_cost(size) <= partial_cost(size, kept);
}

void add_chunks(std::vector<std::uint64_t>& to, DType dtype, std::int64_t begin, std::int64_t end) {
  const std::uint64_t width = dtype_bytes(dtype);
  for (std::uint64_t c = static_cast<std::uint64_t>(begin) * width / kOperandChunkBytes;
       c <= (static_cast<std::uint64_t>(end) * width - 1) / kOperandChunkBytes; ++c)
    to.push_back(c);
}

// The chunks of each operand that value `c` reads, the value itself among the outputs'.
std::pair<std::vector<std::vector<std::uint64_t>>, std::vector<std::vector<std::uint64_t>>>
chunks_read(const OperatorEvidence& e, const Candidate& c) {
  std::vector<std::vector<std::uint64_t>> in(e.inputs.size()), out(e.outputs.size());
  for (const ValueSpan& s : c.spans) {
    auto& list = s.output ? out : in;
    const auto& values = s.output ? e.outputs : e.inputs;
    add_chunks(list[s.operand], values[s.operand].dtype, s.begin, s.end);
  }
  add_chunks(out[c.output], e.outputs[c.output].dtype, c.index, c.index + 1);
  for (auto* side : {&in, &out}) {
    for (auto& list : *side) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
  }
  return {std::move(in), std::move(out)};
}

std::vector<OperandChunks> cut(std::vector<OperandValues>& values,
                               const std::vector<std::vector<std::uint64_t>>& keep) {
  std::vector<OperandChunks> out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (cheaper_whole(values[i].bytes.size(), keep[i].size())) {
      out.push_back(OperandChunks{});
    } else {
      out.push_back(keep_chunks(values[i], keep[i]));
    }
  }
  return out;
}

}  // namespace

std::optional<OperatorEvidence> one_value_evidence(const OperatorEvidence& whole,
                                                   std::size_t output, std::int64_t index) {
  auto spans = value_cone(whole.call, output, index);
  if (!spans || output >= whole.outputs.size()) return std::nullopt;
  const Candidate c{output, index, std::move(*spans), 0};
  OperatorEvidence e = whole;
  const auto [in, out] = chunks_read(whole, c);
  e.input_chunks = cut(e.inputs, in);
  e.output_chunks = cut(e.outputs, out);
  e.disputed = DisputedValue{whole.outputs[output].name, index};
  return e;
}

std::optional<OperatorEvidence> narrow_to_one_value(const OperatorEvidence& whole) {
  auto documented = recompute(whole.call, whole.inputs);
  if (!documented) return std::nullopt;
  constexpr int kPerOutput = 4;  // differing values tried per output
  std::vector<Candidate> candidates;
  for (std::size_t o = 0; o < whole.outputs.size() && o < documented->size(); ++o) {
    const OperandValues &mine = (*documented)[o], &theirs = whole.outputs[o];
    if (mine.bytes.size() != theirs.bytes.size() || mine.dtype != theirs.dtype) continue;
    const std::size_t width = dtype_bytes(theirs.dtype);
    int tried = 0;
    for (std::size_t at = 0; at < theirs.bytes.size() && tried < kPerOutput; at += width) {
      if (std::memcmp(mine.bytes.data() + at, theirs.bytes.data() + at, width) == 0) continue;
      ++tried;
      Candidate c{o, static_cast<std::int64_t>(at / width), {}, 0};
      auto spans = value_cone(whole.call, o, c.index);
      if (!spans) break;  // the operator is refereed on whole operands
      c.spans = std::move(*spans);
      const auto [in, out] = chunks_read(whole, c);
      for (const auto& [side, values] : {std::pair{&in, &whole.inputs}, {&out, &whole.outputs}}) {
        for (std::size_t i = 0; i < side->size(); ++i) {
          const std::uint64_t size = (*values)[i].bytes.size(), kept = (*side)[i].size();
          c.bytes += std::min(whole_cost(size), partial_cost(size, kept));
        }
      }
      candidates.push_back(std::move(c));
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.bytes < b.bytes; });
  for (const Candidate& c : candidates) {
    // Kept only where the referee, shown these values alone, rules against the provider: a
    // batch norm's y agrees with the provider's own wrong mean, and its mean is the value to show.
    auto e = one_value_evidence(whole, c.output, c.index);
    if (!e) continue;
    if (auto ruling = rule(*e); ruling && !ruling->provider_correct) return e;
  }
  return std::nullopt;
}

}  // namespace vt::dispute
