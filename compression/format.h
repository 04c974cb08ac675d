#pragma once
// The container's byte layout (docs/container.md): constants, writer and checked parser.
// Little-endian throughout.
//
//   header   128 bytes   magic, version, codec, flags, sizes, roots, header checksum
//   table    table_size  one entry per section: 56 fixed bytes + the section's name
//   payloads             each section's stored bytes, in table order, back to back

#include <array>
#include <cstdint>

#include "compression/container.h"

namespace vt::comp::format {

inline constexpr std::array<std::uint8_t, 8> kMagic = {0x89, 'V', 'T', 'C', '\r', '\n', 0x1A, '\n'};
inline constexpr std::uint16_t kVersion = 1;
inline constexpr std::size_t kHeaderSize = 128;
inline constexpr std::size_t kHeaderChecksumOffset = 120;
inline constexpr std::size_t kEntryFixedSize = 56;
inline constexpr std::size_t kMaxNameSize = 1024;
inline constexpr std::uint64_t kMinChunkSize = 4u << 10;
inline constexpr std::uint64_t kMaxSectionRaw = 64u << 20;
inline constexpr std::uint8_t kFlagDelta = 1;

// Serializes the header and the table of `info`, whose sections carry their sizes and checksums
// (offsets are implied by order and are not stored).
Bytes write_header_and_table(const ContainerInfo& info);

// Checks everything that can be checked without decoding a section: magic, version, header
// checksum, that the table covers the declared sizes exactly, that each section's method fits the
// codec and its sizes are bounded. Fills in the implied offsets.
Result<ContainerInfo> parse(ByteSpan container);
// The same checks from the header and section table alone (`head` holds at least those bytes)
// and the size of the whole file: for readers that fetch sections one at a time.
Result<ContainerInfo> parse_head(ByteSpan head, std::uint64_t container_size);

// Whether codec `codec` may store a section with `method`.
bool method_allowed(Codec codec, Method method);

std::uint64_t xxh3(ByteSpan bytes);

}  // namespace vt::comp::format
