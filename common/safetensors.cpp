#include "common/safetensors.h"

#include <algorithm>
#include <array>

#include "common/json.h"

namespace vt {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
  bool floating;
};

constexpr std::array<DTypeInfo, 10> kDTypes{{
    {DType::kF64, "F64", 8, true},
    {DType::kF32, "F32", 4, true},
    {DType::kF16, "F16", 2, true},
    {DType::kBF16, "BF16", 2, true},
    {DType::kI64, "I64", 8, false},
    {DType::kI32, "I32", 4, false},
    {DType::kI16, "I16", 2, false},
    {DType::kI8, "I8", 1, false},
    {DType::kU8, "U8", 1, false},
    {DType::kBool, "BOOL", 1, false},
}};

const DTypeInfo& info(DType dtype) { return kDTypes[static_cast<std::size_t>(dtype)]; }

// numel with overflow detection; nullopt if a dimension is negative or the product overflows.
std::optional<std::uint64_t> checked_numel(const std::vector<std::int64_t>& shape) {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    auto ud = static_cast<std::uint64_t>(d);
    if (ud != 0 && n > UINT64_MAX / ud) return std::nullopt;
    n *= ud;
  }
  return n;
}

nlohmann::json header_json(const std::vector<TensorEntry>& tensors, const Metadata& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (const TensorEntry& t : tensors) {
    header[t.name] = {
        {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  }
  return header;
}

Bytes header_prefix(const std::string& json) {
  std::size_t padded = (json.size() + 7) / 8 * 8;
  Bytes out(8 + padded, static_cast<std::uint8_t>(' '));
  put_u64le(out.data(), padded);
  std::copy(json.begin(), json.end(), out.begin() + 8);
  return out;
}

}  // namespace

std::string_view dtype_name(DType dtype) { return info(dtype).name; }
std::size_t dtype_size(DType dtype) { return info(dtype).size; }
bool is_floating(DType dtype) { return info(dtype).floating; }

Result<DType> parse_dtype(std::string_view name) {
  for (const DTypeInfo& i : kDTypes) {
    if (i.name == name) return i.dtype;
  }
  return invalid_input("unsupported dtype \"" + std::string(name) +
                       "\" (expected F64, F32, F16, BF16, I64, I32, I16, I8, U8 or BOOL)");
}

std::uint64_t TensorEntry::numel() const { return checked_numel(shape).value_or(0); }

Result<CanonicalLayout> plan_canonical(std::vector<TensorSpec> specs, const Metadata& metadata) {
  std::sort(specs.begin(), specs.end(),
            [](const TensorSpec& a, const TensorSpec& b) { return a.name < b.name; });
  CanonicalLayout layout;
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    if (s.name.empty() || s.name == "__metadata__") {
      return invalid_input("tensor name \"" + s.name + "\" is not allowed");
    }
    if (i > 0 && specs[i - 1].name == s.name) {
      return invalid_input("tensor \"" + s.name + "\" appears twice");
    }
    auto numel = checked_numel(s.shape);
    if (!numel || *numel > (UINT64_MAX - offset) / dtype_size(s.dtype)) {
      return invalid_input("tensor \"" + s.name + "\" has an invalid shape");
    }
    std::uint64_t nbytes = *numel * dtype_size(s.dtype);
    layout.tensors.push_back({s.name, s.dtype, s.shape, offset, offset + nbytes});
    offset += nbytes;
  }
  layout.prefix = header_prefix(header_json(layout.tensors, metadata).dump());
  layout.total_size = layout.prefix.size() + offset;
  return layout;
}

Result<Bytes> write_canonical(const std::vector<TensorData>& tensors, const Metadata& metadata) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const TensorData& t : tensors) specs.push_back(t.spec);
  VT_ASSIGN_OR_RETURN(CanonicalLayout layout, plan_canonical(std::move(specs), metadata));
  Bytes out(layout.total_size);
  std::copy(layout.prefix.begin(), layout.prefix.end(), out.begin());
  for (const TensorData& t : tensors) {
    auto it =
        std::lower_bound(layout.tensors.begin(), layout.tensors.end(), t.spec.name,
                         [](const TensorEntry& e, const std::string& n) { return e.name < n; });
    if (t.data.size() != it->nbytes()) {
      return invalid_input("tensor \"" + t.spec.name + "\" has " + std::to_string(t.data.size()) +
                           " bytes of data, its shape needs " + std::to_string(it->nbytes()));
    }
    std::copy(t.data.begin(), t.data.end(), out.begin() + layout.data_start() + it->begin);
  }
  return out;
}

const TensorEntry* SafetensorsView::find(std::string_view name) const {
  for (const TensorEntry& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Result<SafetensorsView> parse_safetensors(ByteSpan bytes, Canonical mode) {
  return parse_safetensors_prefix(bytes, bytes.size(), mode);
}

Result<SafetensorsView> parse_safetensors_prefix(ByteSpan bytes, std::uint64_t file_size,
                                                 Canonical mode) {
  if (bytes.size() < 8 || file_size < 8) {
    return invalid_input("safetensors: file is " + std::to_string(file_size) +
                         " bytes, too short for the 8-byte header length");
  }
  std::uint64_t n = get_u64le(bytes.data());
  if (n > kMaxSafetensorsHeader || n > file_size - 8) {
    return invalid_input("safetensors: header length " + std::to_string(n) +
                         " exceeds the file size or the 100 MiB limit");
  }
  if (n > bytes.size() - 8)
    return invalid_input("safetensors: the header's " + std::to_string(n) +
                         " bytes were not read whole");
  std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), n);
  auto parsed = parse_json_bounded(text, "safetensors: header");
  if (!parsed.ok()) return parsed.error();
  nlohmann::json header = std::move(parsed).value();
  if (!header.is_object()) {
    return invalid_input("safetensors: header is not a JSON object");
  }
  SafetensorsView view;
  view.bytes = bytes;
  view.data_start = 8 + n;
  const std::uint64_t data_size = file_size - view.data_start;
  for (auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return invalid_input("safetensors: __metadata__ is not an object");
      for (auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          return invalid_input("safetensors: __metadata__." + mk + " is not a string");
        }
        view.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string where = "safetensors: tensor \"" + key + "\"";
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
        !value.contains("data_offsets") || value.size() != 3) {
      return invalid_input(where + ": expected exactly dtype, shape and data_offsets");
    }
    const auto& dt = value["dtype"];
    const auto& shape = value["shape"];
    const auto& offsets = value["data_offsets"];
    if (!dt.is_string()) return invalid_input(where + ": dtype is not a string");
    auto dtype = parse_dtype(dt.get<std::string>());
    if (!dtype) return dtype.error().context(where);
    TensorEntry entry{key, *dtype, {}, 0, 0};
    if (!shape.is_array()) return invalid_input(where + ": shape is not an array");
    for (const auto& d : shape) {
      if (!d.is_number_unsigned())
        return invalid_input(where + ": shape holds a non-natural number");
      entry.shape.push_back(d.get<std::int64_t>());
    }
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      return invalid_input(where + ": data_offsets is not a pair of natural numbers");
    }
    entry.begin = offsets[0].get<std::uint64_t>();
    entry.end = offsets[1].get<std::uint64_t>();
    auto numel = checked_numel(entry.shape);
    if (entry.begin > entry.end || entry.end > data_size) {
      return invalid_input(where + ": data_offsets [" + std::to_string(entry.begin) + ", " +
                           std::to_string(entry.end) + "] fall outside the " +
                           std::to_string(data_size) + "-byte data section (truncated file?)");
    }
    if (!numel || *numel > UINT64_MAX / dtype_size(entry.dtype) ||
        *numel * dtype_size(entry.dtype) != entry.nbytes()) {
      return invalid_input(where + ": shape does not match its " + std::to_string(entry.nbytes()) +
                           " bytes of data");
    }
    view.tensors.push_back(std::move(entry));
  }
  if (mode == Canonical::kAllowAny) return view;

  // header.items() iterates keys sorted: canonical data lies in that order, back to back.
  std::uint64_t expected = 0;
  for (const TensorEntry& t : view.tensors) {
    if (t.begin != expected) {
      return invalid_input("safetensors: not canonical: tensor \"" + t.name + "\" starts at " +
                           std::to_string(t.begin) + ", expected " + std::to_string(expected));
    }
    expected = t.end;
  }
  if (expected != data_size) {
    return invalid_input("safetensors: not canonical: " + std::to_string(data_size - expected) +
                         " trailing bytes after the last tensor");
  }
  Bytes canonical = header_prefix(header_json(view.tensors, view.metadata).dump());
  if (canonical.size() != view.data_start ||
      !std::equal(canonical.begin(), canonical.end(), bytes.begin())) {
    return invalid_input("safetensors: not canonical: header differs from its canonical form");
  }
  return view;
}

}  // namespace vt
