#include "fingerprint/fingerprint.h"

#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

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

// nlohmann keeps integers it built itself signed and those it parsed unsigned; accept both.
bool is_unsigned(const nlohmann::json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
}

// Reads field `key` of object `j` as type T, naming `where.key` when it is absent or mistyped.
template <typename T>
Result<T> field(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  const std::string path = where + "." + key;
  if (it == j.end()) return invalid_input(path + ": missing");
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return invalid_input(path + ": expected a string");
  } else if constexpr (std::is_same_v<T, std::uint64_t>) {
    if (!is_unsigned(*it)) return invalid_input(path + ": expected an unsigned integer");
  } else {
    if (!it->is_array()) return invalid_input(path + ": expected an array");
  }
  return it->get<T>();
}

Result<TensorSamples> tensor_from_json(const nlohmann::json& j, const std::string& where,
                                       Bytes& values) {
  if (!j.is_object()) return invalid_input(where + ": expected an object");
  if (j.size() != 5)
    return invalid_input(where + ": expected exactly dtype, indices, name, numel and values");
  TensorSamples t;
  VT_ASSIGN_OR_RETURN(t.name, field<std::string>(j, "name", where));
  VT_ASSIGN_OR_RETURN(std::string dtype, field<std::string>(j, "dtype", where));
  auto parsed = parse_dtype(dtype);
  if (!parsed.ok() || !is_floating(*parsed)) {
    return invalid_input(where + ".dtype: \"" + dtype + "\" is not one of F64, F32, F16, BF16");
  }
  t.dtype = *parsed;
  VT_ASSIGN_OR_RETURN(t.numel, field<std::uint64_t>(j, "numel", where));
  VT_ASSIGN_OR_RETURN(nlohmann::json indices, field<nlohmann::json>(j, "indices", where));
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::string at = where + ".indices[" + std::to_string(i) + "]";
    if (!is_unsigned(indices[i])) return invalid_input(at + ": expected an unsigned integer");
    std::uint64_t v = indices[i].get<std::uint64_t>();
    if (v >= t.numel)
      return invalid_input(at + ": " + std::to_string(v) + " is not below numel " +
                           std::to_string(t.numel));
    if (!t.indices.empty() && v <= t.indices.back())
      return invalid_input(at + ": indices must ascend strictly");
    t.indices.push_back(v);
  }
  VT_ASSIGN_OR_RETURN(std::string hex, field<std::string>(j, "values", where));
  auto decoded = hex_decode(hex);
  if (!decoded.ok()) return decoded.error().context(where + ".values");
  auto sized = check_value_bytes(t, decoded->size());
  if (!sized.ok()) return sized.error().context(where + ".values");
  values = std::move(decoded).value();
  return t;
}

}  // namespace

Result<Fingerprint> gather(const SamplePlan& plan, const SafetensorsView& snapshot) {
  std::unordered_map<std::string_view, const TensorEntry*> by_name;
  by_name.reserve(snapshot.tensors.size());
  for (const TensorEntry& e : snapshot.tensors) by_name.emplace(e.name, &e);
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
    ByteSpan data = snapshot.data(e);
    Bytes values(t.indices.size() * size);
    for (std::size_t i = 0; i < t.indices.size(); ++i) {
      if (t.indices[i] >= t.numel) {
        return invalid_input("fingerprint: plan index " + std::to_string(t.indices[i]) +
                             " of tensor " + quote_name(t.name) + " is not below its " +
                             std::to_string(t.numel) + " elements");
      }
      std::copy_n(data.data() + t.indices[i] * size, size, values.data() + i * size);
    }
    out.values.push_back(std::move(values));
  }
  return out;
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
  const std::string where = "fingerprint";
  if (!j.is_object()) return invalid_input(where + ": expected an object");
  VT_ASSIGN_OR_RETURN(std::uint64_t version, field<std::uint64_t>(j, "version", where));
  if (version != 1)
    return invalid_input(where + ".version: " + std::to_string(version) +
                         " is not supported (expected 1)");
  VT_ASSIGN_OR_RETURN(std::string seed_hex, field<std::string>(j, "seed", where));
  Fingerprint fp;
  VT_ASSIGN_OR_RETURN(fp.plan.seed, digest_from_hex(seed_hex, where + ".seed"));
  VT_ASSIGN_OR_RETURN(nlohmann::json tensors, field<nlohmann::json>(j, "tensors", where));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string at = where + ".tensors[" + std::to_string(i) + "]";
    Bytes values;
    VT_ASSIGN_OR_RETURN(TensorSamples t, tensor_from_json(tensors[i], at, values));
    if (!fp.plan.tensors.empty() && t.name <= fp.plan.tensors.back().name) {
      return invalid_input(at + ".name: " + quote_name(t.name) +
                           " is out of order; names must ascend strictly (bytewise)");
    }
    fp.plan.tensors.push_back(std::move(t));
    fp.values.push_back(std::move(values));
  }
  return fp;
}

}  // namespace vt::fp
