#pragma once
// Canonical safetensors: the byte form of every snapshot (docs/snapshot.md).
//
//   u64le N | N bytes of header JSON | data
//
// Canonical means one byte string per state: tensors sorted by name (bytewise), data laid out
// contiguously in that order from offset 0, header JSON with sorted keys and no whitespace,
// padded with spaces to a multiple of 8 bytes, "__metadata__" holding string values only.
// Any safetensors reader loads it; only canonical files are accepted where roots are taken.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/bytes.h"

namespace vt {

enum class DType : std::uint8_t { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

std::string_view dtype_name(DType dtype);  // "F32", "BF16", ... as safetensors spells them
Result<DType> parse_dtype(std::string_view name);
std::size_t dtype_size(DType dtype);
bool is_floating(DType dtype);

using Metadata = std::map<std::string, std::string>;

struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
};

struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets relative to the start of the data section
  std::uint64_t end = 0;

  std::uint64_t numel() const;
  std::uint64_t nbytes() const { return end - begin; }
};

// The header of a canonical file, computed before any data exists, so a writer can place each
// tensor's bytes straight into one preallocated buffer.
struct CanonicalLayout {
  Bytes prefix;                      // u64le N followed by the padded header
  std::vector<TensorEntry> tensors;  // sorted by name
  std::uint64_t total_size = 0;      // prefix + data

  std::uint64_t data_start() const { return prefix.size(); }
};

Result<CanonicalLayout> plan_canonical(std::vector<TensorSpec> specs, const Metadata& metadata);

struct TensorData {
  TensorSpec spec;
  ByteSpan data;  // exactly numel * dtype_size bytes
};

// Builds canonical bytes from tensors in any order.
Result<Bytes> write_canonical(const std::vector<TensorData>& tensors, const Metadata& metadata);

// A parsed file: a view over bytes the caller keeps alive.
struct SafetensorsView {
  ByteSpan bytes;
  std::uint64_t data_start = 0;
  Metadata metadata;
  std::vector<TensorEntry> tensors;  // sorted by name (header key order), whatever the data order

  const TensorEntry* find(std::string_view name) const;
  ByteSpan data(const TensorEntry& entry) const {
    return bytes.subspan(data_start + entry.begin, entry.nbytes());
  }
};

enum class Canonical { kRequire, kAllowAny };

// Parses and bounds-checks a file. With kRequire, anything but the canonical form of its own
// content is rejected, naming the first difference.
Result<SafetensorsView> parse_safetensors(ByteSpan bytes, Canonical mode = Canonical::kRequire);
// The same checks from the prefix alone (at least the u64 and the header JSON) of a file of
// `file_size` bytes: for a reader that holds a snapshot a piece at a time. The view's `bytes` is
// `prefix`, so its data() must not be called.
Result<SafetensorsView> parse_safetensors_prefix(ByteSpan prefix, std::uint64_t file_size,
                                                 Canonical mode = Canonical::kRequire);

inline constexpr std::uint64_t kMaxSafetensorsHeader = 100u << 20;

}  // namespace vt
