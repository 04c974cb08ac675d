#pragma once
// How a container's sections are planned and coded (docs/container.md, "Sections"): shared by
// the encoder that holds the canonical bytes (encode.cpp) and the one that reads them a window
// at a time (stream_encode.cpp), so the two write the same container for the same bytes.

#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <span>
#include <vector>

#include "common/safetensors.h"
#include "compression/container.h"

namespace vt::comp {

struct PlannedSection {
  SectionInfo info;
  std::optional<std::uint64_t> base_offset;  // a matching run in the base, for delta
};

// What the plan needs of a snapshot: where its data starts and its tensors (sorted by name).
struct SnapshotLayout {
  std::uint64_t data_start = 0;
  std::span<const TensorEntry> tensors;
};

int default_level(Codec codec);
Method primary_method(Codec codec);
Status check_options(const EncodeOptions& o, int level, bool has_base);

// The sections of a snapshot, numbered, with names the container can hold: the safetensors
// prefix in chunks, then every non-empty tensor in chunks, in table order = canonical order.
Result<std::vector<PlannedSection>> plan_sections(const SnapshotLayout& layout,
                                                  std::uint64_t chunk_size);

// Points each section at the same bytes of the base when the base has a tensor of the same name,
// dtype and size (and, for the header section, a header of the same size).
void match_base(std::vector<PlannedSection>& sections, const SnapshotLayout& after,
                const SnapshotLayout& base);

// Where each payload may start if coded at its bound: slot[0] is the end of the section table.
std::vector<std::uint64_t> payload_slots(const std::vector<PlannedSection>& sections, Codec codec);

// Codes one section's `raw` bytes (against `base_run`, the matching bytes of the base, for a
// delta) into `payload`, filling in its info's method, payload and delta fields.
Result<std::uint64_t> code_section(PlannedSection& section, ByteSpan raw, ByteSpan base_run,
                                   Codec codec, int level, Bytes& payload);

// Runs an encoder, naming its failures "encoding container: ..." and turning what the coding
// libraries throw (memory, above all) into errors.
template <typename F>
auto guarded_encoding(F&& encode) -> decltype(encode()) {
  try {
    auto result = encode();
    if (!result.ok()) return result.error().context("encoding container");
    return result;
  } catch (const std::bad_alloc&) {
    return internal_error("encoding container: out of memory");
  } catch (const std::exception& e) {
    return internal_error(std::string("encoding container: ") + e.what());
  }
}

}  // namespace vt::comp
