#pragma once
// The snapshot container: compressed canonical snapshot bytes, on disk and on the wire.
// The byte layout is specified in docs/container.md; format.h holds its constants.
//
// A container is a checked header, a section table and independent sections. Sections follow
// the safetensors layout of the snapshot (the header JSON, then each tensor in 1 MiB chunks), so
// they are coded and decoded in parallel on a ThreadPool, and each is a standard zstd or xz frame
// sequence. Decoding returns the canonical bytes exactly and checks every section's checksums and
// the Merkle root of the whole; a delta container also names the root of the base it needs.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "common/result.h"
#include "compression/planes.h"

namespace vt {
class ThreadPool;
}

namespace vt::comp {

enum class Codec : std::uint8_t { kRaw = 0, kZstd = 1, kPlanes = 2, kDelta = 3, kXz = 4 };

std::string_view codec_name(Codec codec);  // "raw", "zstd", "planes", "delta", "xz"
Result<Codec> parse_codec(std::string_view name);

// How one section is stored; a container's codec decides which methods its sections use.
enum class Method : std::uint8_t {
  kStored = 0,       // the bytes themselves
  kZstd = 1,         // one zstd frame of the bytes
  kPlanes = 2,       // one zstd frame per byte plane of the transformed words
  kDeltaPlanes = 3,  // a zstd frame of the change mask, then one per plane of the differences
  kXzPlanes = 4,     // one xz stream of the transformed words, planes one after another
};
std::string_view method_name(Method method);

struct EncodeOptions {
  Codec codec = Codec::kPlanes;
  // 0 picks the codec's default: zstd 3, planes and delta 1, xz preset 6.
  int level = 0;
  // The largest section; a tensor bigger than this is split. A multiple of 8 in [4 KiB, 64 MiB].
  std::uint64_t chunk_size = std::uint64_t{1} << 20;
  // Sections are coded on `pool` when given, else on a pool of `threads` (0: one per hardware
  // thread; 1: the calling thread alone).
  ThreadPool* pool = nullptr;
  std::size_t threads = 1;
  // kDelta: the canonical bytes of the "before" snapshot. Tensors are matched by name, dtype and
  // size; a section without a match, or for which the delta does not pay, is coded as planes.
  ByteSpan base;
  // Merkle roots the caller has already computed (the provider commits to them); when absent
  // they are computed here.
  std::optional<Digest> root;
  std::optional<Digest> base_root;
};

struct DecodeOptions {
  ByteSpan base;  // the base snapshot of a delta container; its root must match the header's
  ThreadPool* pool = nullptr;
  std::size_t threads = 1;
  // Checks the Merkle root of the decoded bytes. Section checksums are always checked; turn this
  // off only when the caller hashes the result itself anyway.
  bool verify_root = true;
  std::optional<Digest> base_root;  // the base's root when already known, to skip hashing it
  // A header may declare at most max_expansion × (container size) + 2 × (base size) raw bytes,
  // and never more than max_raw_size; both are checked before anything is allocated.
  std::uint64_t max_expansion = 1024;
  std::uint64_t max_raw_size = std::uint64_t{64} << 30;
};

struct SectionInfo {
  std::uint32_t index = 0;
  std::string name;         // "__header__" for the safetensors header, else the tensor name
  std::uint32_t chunk = 0;  // chunk index within the tensor
  Method method = Method::kStored;
  WordKind word = WordKind::kByte;
  std::uint64_t raw_offset = 0;  // in the canonical bytes
  std::uint64_t raw_size = 0;
  std::uint64_t payload_offset = 0;  // in the container
  std::uint64_t payload_size = 0;
  std::uint64_t base_offset = 0;  // kDeltaPlanes: where the matching words start in the base
  std::uint64_t changed = 0;      // kDeltaPlanes: words that differ from the base
  std::uint64_t payload_xxh3 = 0;
  std::uint64_t raw_xxh3 = 0;

  std::string label() const;  // "section 3 (tensor 'w' chunk 1)" for error messages
};

struct ContainerInfo {
  std::uint16_t version = 0;
  Codec codec = Codec::kRaw;
  std::uint64_t raw_size = 0;
  std::uint64_t container_size = 0;
  Digest root{};
  std::optional<Digest> base_root;
  std::uint64_t base_size = 0;
  std::vector<SectionInfo> sections;
};

// Codes canonical safetensors bytes (snapshot format, docs/snapshot.md) into a container.
Result<Bytes> encode(ByteSpan canonical, const EncodeOptions& options = {});

// Returns the canonical bytes a container holds, after checking it against its header.
Result<Bytes> decode(ByteSpan container, const DecodeOptions& options = {});

// Parses and checks the header and section table only (for `veritrain inspect`).
Result<ContainerInfo> read_container_info(ByteSpan container);

enum class FrameFormat : std::uint8_t { kNone, kZstd, kXz };
struct ExtractedSection {
  FrameFormat format = FrameFormat::kNone;  // what tool decodes `payload`: zstd -d, xz -d, none
  Bytes payload;
};
// The stored payload of section `index`, checksum-verified. A zstd or xz payload decodes with the
// standard tool to the section's transformed stream (docs/container.md says which).
Result<ExtractedSection> extract_section(ByteSpan container, std::uint32_t index);

}  // namespace vt::comp
