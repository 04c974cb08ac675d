#include "fingerprint/fingerprint.h"

#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "fingerprint/merkle.h"

namespace vt::fp {
namespace {

std::string quote_name(const std::string& name) { return "\"" + name + "\""; }

Status check_value_bytes(const TensorSamples& t, std::size_t got) {
  if (!is_floating(t.dtype)) {
    return invalid_input("fingerprint: tensor " + quote_name(t.name) + " has dtype " +
                         std::string(dtype_name(t.dtype)) +
                         "; only F64, F32, F16 and BF16 are sampled");
  }
  const std::size_t want = t.indices.size() * dtype_size(t.dtype);
  if (got != want) {
    return invalid_input("fingerprint: tensor " + quote_name(t.name) + " has " +
                         std::to_string(got) + " bytes of values, " +
                         std::to_string(t.indices.size()) + " " + std::string(dtype_name(t.dtype)) +
                         " values need " + std::to_string(want));
  }
  return {};
}

// One entry of "tensors", at `path` ("tensors[3]") of the fingerprint.
Result<TensorSamples> tensor_from_json(const nlohmann::json& j, const std::string& path,
                                       Bytes& values) {
  if (!j.is_object()) return invalid_input("fingerprint: " + path + ": expected an object");
  const JsonFields r(j, "fingerprint", path);
  VT_RETURN_IF_ERROR(r.known_keys({"dtype", "indices", "name", "numel", "values"}));
  TensorSamples t;
  VT_RETURN_IF_ERROR(r.string("name", t.name, true));
  std::string dtype;
  VT_RETURN_IF_ERROR(r.string("dtype", dtype, true));
  auto parsed = parse_dtype(dtype);
  if (!parsed.ok() || !is_floating(*parsed))
    return r.problem("dtype", "\"" + dtype + "\" is not one of F64, F32, F16, BF16");
  t.dtype = *parsed;
  VT_RETURN_IF_ERROR(r.unsigned64("numel", t.numel, true));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* indices, r.find("indices", true, "an array"));
  if (!indices->is_array()) return r.wrong("indices", "an array", *indices);
  for (std::size_t i = 0; i < indices->size(); ++i) {
    const std::string at = "indices[" + std::to_string(i) + "]";
    const nlohmann::json& index = (*indices)[i];
    const bool non_negative =
        index.is_number_unsigned() || (index.is_number_integer() && index.get<std::int64_t>() >= 0);
    if (!non_negative) return r.wrong(at, "an unsigned integer", index);
    const std::uint64_t v = index.get<std::uint64_t>();
    if (v >= t.numel)
      return r.problem(at, std::to_string(v) + " is not below numel " + std::to_string(t.numel));
    if (!t.indices.empty() && v <= t.indices.back())
      return r.problem(at, "indices must ascend strictly");
    t.indices.push_back(v);
  }
  std::string hex;
  VT_RETURN_IF_ERROR(r.string("values", hex, true));
  auto decoded = hex_decode(hex);
  if (!decoded.ok()) return r.problem("values", decoded.error().message);
  if (auto sized = check_value_bytes(t, decoded->size()); !sized.ok())
    return r.problem("values", sized.error().message);
  values = std::move(decoded).value();
  return t;
}

// Both gathers: `read(entry, at, out)` fills `out` from byte `at` of the entry's data. A template,
// so that the in-memory gather (every value of a state, in tolerance mode) stays a plain copy.
template <typename Read>
Result<Fingerprint> gather_values(const SamplePlan& plan, const std::vector<TensorEntry>& tensors,
                                  Read&& read) {
  std::unordered_map<std::string_view, const TensorEntry*> by_name;
  by_name.reserve(tensors.size());
  for (const TensorEntry& e : tensors) by_name.emplace(e.name, &e);
  Fingerprint out{plan, {}};
  out.values.reserve(plan.tensors.size());
  for (const TensorSamples& t : plan.tensors) {
    auto it = by_name.find(t.name);
    if (it == by_name.end())
      return invalid_input("fingerprint: snapshot has no tensor " + quote_name(t.name));
    const TensorEntry& e = *it->second;
    if (e.dtype != t.dtype || e.numel() != t.numel) {
      return invalid_input("fingerprint: snapshot tensor " + quote_name(t.name) + " is " +
                           std::string(dtype_name(e.dtype)) + " with " + std::to_string(e.numel()) +
                           " elements, the plan expects " + std::string(dtype_name(t.dtype)) +
                           " with " + std::to_string(t.numel));
    }
    VT_RETURN_IF_ERROR(check_value_bytes(t, t.indices.size() * dtype_size(t.dtype)));
    const std::size_t size = dtype_size(t.dtype);
    Bytes values(t.indices.size() * size);
    for (std::size_t i = 0; i < t.indices.size(); ++i) {
      if (t.indices[i] >= t.numel) {
        return invalid_input("fingerprint: plan index " + std::to_string(t.indices[i]) +
                             " of tensor " + quote_name(t.name) + " is not below its " +
                             std::to_string(t.numel) + " elements");
      }
      VT_RETURN_IF_ERROR(
          read(e, t.indices[i] * size, std::span<std::uint8_t>(values.data() + i * size, size)));
    }
    out.values.push_back(std::move(values));
  }
  return out;
}

}  // namespace

Result<Fingerprint> gather(const SamplePlan& plan, const SafetensorsView& snapshot) {
  return gather_values(plan, snapshot.tensors,
                       [&](const TensorEntry& e, std::uint64_t at, std::span<std::uint8_t> out) {
                         std::copy_n(snapshot.data(e).data() + at, out.size(), out.data());
                         return Status{};
                       });
}

Result<Fingerprint> gather(const SamplePlan& plan, const std::vector<TensorEntry>& tensors,
                           const TensorBytesReader& read) {
  return gather_values(plan, tensors, read);
}

Result<Fingerprint> fingerprint_from_values(SamplePlan plan, std::vector<Bytes> values) {
  if (values.size() != plan.tensors.size()) {
    return invalid_input("fingerprint: " + std::to_string(values.size()) +
                         " value buffers for a plan of " + std::to_string(plan.tensors.size()) +
                         " tensors");
  }
  for (std::size_t i = 0; i < values.size(); ++i)
    VT_RETURN_IF_ERROR(check_value_bytes(plan.tensors[i], values[i].size()));
  return Fingerprint{std::move(plan), std::move(values)};
}

Result<Fingerprint> fingerprint_snapshot(const SafetensorsView& snapshot, const Digest& seed,
                                         std::uint64_t k) {
  VT_ASSIGN_OR_RETURN(SamplePlan plan,
                      plan_samples(seed, std::span<const TensorEntry>(snapshot.tensors), k));
  return gather(plan, snapshot);
}

Result<Commitment> commit_snapshot(ByteSpan canonical_bytes, const Digest& task_id,
                                   std::uint64_t epoch, std::uint64_t k, ThreadPool* pool) {
  VT_ASSIGN_OR_RETURN(SafetensorsView view,
                      parse_safetensors(canonical_bytes, Canonical::kRequire));
  Commitment c;
  c.root = merkle_root(canonical_bytes, pool);
  VT_ASSIGN_OR_RETURN(c.fingerprint,
                      fingerprint_snapshot(view, commitment_seed(task_id, epoch, c.root), k));
  return c;
}

nlohmann::json fingerprint_to_json(const Fingerprint& fp) {
  nlohmann::json tensors = nlohmann::json::array();
  for (std::size_t i = 0; i < fp.plan.tensors.size(); ++i) {
    const TensorSamples& t = fp.plan.tensors[i];
    tensors.push_back(
        {{"name", t.name},
         {"dtype", dtype_name(t.dtype)},
         {"numel", t.numel},
         {"indices", t.indices},
         {"values", i < fp.values.size() ? hex_encode(fp.values[i]) : std::string()}});
  }
  return {{"version", 1}, {"seed", hex_encode(fp.plan.seed)}, {"tensors", std::move(tensors)}};
}

Result<Fingerprint> fingerprint_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return invalid_input("fingerprint: expected an object");
  const JsonFields r(j, "fingerprint", "", "the fingerprint");
  VT_RETURN_IF_ERROR(r.known_keys({"seed", "tensors", "version"}));
  std::uint64_t version = 0;
  VT_RETURN_IF_ERROR(r.unsigned64("version", version, true));
  if (version != 1)
    return r.problem("version", std::to_string(version) + " is not supported (expected 1)");
  std::string seed_hex;
  VT_RETURN_IF_ERROR(r.string("seed", seed_hex, true));
  Fingerprint fp;
  VT_ASSIGN_OR_RETURN(fp.plan.seed, digest_from_hex(seed_hex, "fingerprint: seed"));
  VT_ASSIGN_OR_RETURN(const nlohmann::json* tensors, r.find("tensors", true, "an array"));
  if (!tensors->is_array()) return r.wrong("tensors", "an array", *tensors);
  for (std::size_t i = 0; i < tensors->size(); ++i) {
    const std::string at = "tensors[" + std::to_string(i) + "]";
    Bytes values;
    VT_ASSIGN_OR_RETURN(TensorSamples t, tensor_from_json((*tensors)[i], at, values));
    if (!fp.plan.tensors.empty() && t.name <= fp.plan.tensors.back().name) {
      return invalid_input("fingerprint: " + at + ".name: " + quote_name(t.name) +
                           " is out of order; names must ascend strictly (bytewise)");
    }
    fp.plan.tensors.push_back(std::move(t));
    fp.values.push_back(std::move(values));
  }
  return fp;
}

}  // namespace vt::fp
