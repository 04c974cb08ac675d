#include "compression/format.h"

// The state struct is only complete with static linking on; it lives on the stack.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace vt::comp::format {
namespace {

std::uint64_t header_checksum(ByteSpan header_prefix, ByteSpan table) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, header_prefix.data(), header_prefix.size());
  XXH3_64bits_update(&state, table.data(), table.size());
  return XXH3_64bits_digest(&state);
}

bool add_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& sum) {
  sum = a + b;
  return sum < a;
}

}  // namespace

std::uint64_t xxh3(ByteSpan bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

bool method_allowed(Codec codec, Method method) {
  switch (codec) {
    case Codec::kRaw:
      return method == Method::kStored;
    case Codec::kZstd:
      return method == Method::kZstd;
    case Codec::kPlanes:
      return method == Method::kPlanes;
    case Codec::kDelta:
      return method == Method::kPlanes || method == Method::kDeltaPlanes;
    case Codec::kXz:
      return method == Method::kXzPlanes;
  }
  return false;
}

Bytes write_header_and_table(const ContainerInfo& info) {
  Bytes table;
  std::uint64_t payload_size = 0;
  for (const SectionInfo& s : info.sections) {
    std::size_t at = table.size();
    table.resize(at + kEntryFixedSize);
    std::uint8_t* e = table.data() + at;
    e[0] = static_cast<std::uint8_t>(s.method);
    e[1] = static_cast<std::uint8_t>(s.word);
    e[2] = static_cast<std::uint8_t>(s.name.size());
    e[3] = static_cast<std::uint8_t>(s.name.size() >> 8);
    put_u32le(e + 4, s.chunk);
    put_u64le(e + 8, s.raw_size);
    put_u64le(e + 16, s.payload_size);
    put_u64le(e + 24, s.base_offset);
    put_u64le(e + 32, s.changed);
    put_u64le(e + 40, s.payload_xxh3);
    put_u64le(e + 48, s.raw_xxh3);
    append_bytes(table, as_bytes(s.name));
    payload_size += s.payload_size;
  }
  Bytes out(kHeaderSize, 0);
  std::uint8_t* h = out.data();
  std::copy(kMagic.begin(), kMagic.end(), h);
  h[8] = static_cast<std::uint8_t>(kVersion);
  h[9] = static_cast<std::uint8_t>(kVersion >> 8);
  h[10] = static_cast<std::uint8_t>(info.codec);
  h[11] = info.base_root ? kFlagDelta : 0;
  put_u32le(h + 12, static_cast<std::uint32_t>(info.sections.size()));
  put_u64le(h + 16, info.raw_size);
  put_u64le(h + 24, table.size());
  put_u64le(h + 32, payload_size);
  put_u64le(h + 40, info.base_root ? info.base_size : 0);
  std::copy(info.root.begin(), info.root.end(), h + 48);
  if (info.base_root) std::copy(info.base_root->begin(), info.base_root->end(), h + 80);
  // Bytes 112..119 are reserved and zero.
  put_u64le(h + kHeaderChecksumOffset, header_checksum(ByteSpan(h, kHeaderChecksumOffset), table));
  append_bytes(out, table);
  return out;
}

Result<ContainerInfo> parse(ByteSpan c) { return parse_head(c, c.size()); }

Result<ContainerInfo> parse_head(ByteSpan c, std::uint64_t container_size) {
  if (c.size() < kHeaderSize || container_size < kHeaderSize) {
    return invalid_input("container is " + std::to_string(container_size) +
                         " bytes, shorter than its " + std::to_string(kHeaderSize) +
                         "-byte header");
  }
  if (!std::equal(kMagic.begin(), kMagic.end(), c.begin()))
    return invalid_input("not a veritrain container (bad magic)");
  ContainerInfo info;
  info.version = static_cast<std::uint16_t>(c[8] | (c[9] << 8));
  if (info.version != kVersion) {
    return invalid_input("container version " + std::to_string(info.version) +
                         " is not supported (expected " + std::to_string(kVersion) + ")");
  }
  if (c[10] > static_cast<std::uint8_t>(Codec::kXz))
    return invalid_input("header: unknown codec " + std::to_string(c[10]));
  info.codec = static_cast<Codec>(c[10]);
  std::uint8_t flags = c[11];
  if (flags & ~kFlagDelta) return invalid_input("header: unknown flags " + std::to_string(flags));
  if (((flags & kFlagDelta) != 0) != (info.codec == Codec::kDelta)) {
    return invalid_input("header: the base flag does not match codec " +
                         std::string(codec_name(info.codec)));
  }
  std::uint32_t count = get_u32le(c.data() + 12);
  info.raw_size = get_u64le(c.data() + 16);
  std::uint64_t table_size = get_u64le(c.data() + 24);
  std::uint64_t payload_size = get_u64le(c.data() + 32);
  info.base_size = get_u64le(c.data() + 40);
  std::copy(c.begin() + 48, c.begin() + 80, info.root.begin());
  if (flags & kFlagDelta) {
    info.base_root.emplace();
    std::copy(c.begin() + 80, c.begin() + 112, info.base_root->begin());
  } else if (info.base_size != 0) {
    return invalid_input("header: base size set without a base");
  }
  if (get_u64le(c.data() + 112) != 0)
    return invalid_input("header: reserved bytes 112..119 are not zero");

  std::uint64_t body = container_size - kHeaderSize;
  if (table_size > body || payload_size != body - table_size) {
    return invalid_input("container is " + std::to_string(container_size) +
                         " bytes but its header declares " + std::to_string(kHeaderSize) + " + " +
                         std::to_string(table_size) + " + " + std::to_string(payload_size) +
                         " (truncated or trailing bytes)");
  }
  if (table_size > c.size() - kHeaderSize)
    return internal_error("container head: the section table was not read whole");
  ByteSpan table = c.subspan(kHeaderSize, table_size);
  std::uint64_t stored = get_u64le(c.data() + kHeaderChecksumOffset);
  if (header_checksum(c.first(kHeaderChecksumOffset), table) != stored) {
    return invalid_input("header or section table is corrupted (checksum mismatch)");
  }
  if (count > table_size / kEntryFixedSize) {
    return invalid_input("header declares " + std::to_string(count) + " sections, more than a " +
                         std::to_string(table_size) + "-byte table can hold");
  }

  info.container_size = container_size;
  info.sections.reserve(count);
  std::uint64_t at = 0, raw_offset = 0, payload_offset = kHeaderSize + table_size;
  for (std::uint32_t i = 0; i < count; ++i) {
    std::string where = "section " + std::to_string(i) + ": ";
    if (table_size - at < kEntryFixedSize) return invalid_input(where + "table entry is truncated");
    const std::uint8_t* e = table.data() + at;
    SectionInfo s;
    s.index = i;
    if (e[0] > static_cast<std::uint8_t>(Method::kXzPlanes))
      return invalid_input(where + "unknown method " + std::to_string(e[0]));
    s.method = static_cast<Method>(e[0]);
    if (!method_allowed(info.codec, s.method)) {
      return invalid_input(where + "method " + std::string(method_name(s.method)) +
                           " is not allowed in a " + std::string(codec_name(info.codec)) +
                           " container");
    }
    if (e[1] >= kWordKindCount)
      return invalid_input(where + "unknown word kind " + std::to_string(e[1]));
    s.word = static_cast<WordKind>(e[1]);
    std::size_t name_size = static_cast<std::size_t>(e[2] | (e[3] << 8));
    s.chunk = get_u32le(e + 4);
    s.raw_size = get_u64le(e + 8);
    s.payload_size = get_u64le(e + 16);
    s.base_offset = get_u64le(e + 24);
    s.changed = get_u64le(e + 32);
    s.payload_xxh3 = get_u64le(e + 40);
    s.raw_xxh3 = get_u64le(e + 48);
    at += kEntryFixedSize;
    if (name_size > kMaxNameSize || name_size > table_size - at)
      return invalid_input(where + "name is truncated or too long");
    s.name.assign(reinterpret_cast<const char*>(table.data() + at), name_size);
    at += name_size;
    where = s.label() + ": ";

    std::size_t w = word_size(s.word);
    if (s.raw_size > kMaxSectionRaw) {
      return invalid_input(where + "declares " + std::to_string(s.raw_size) +
                           " raw bytes, above the section limit of " +
                           std::to_string(kMaxSectionRaw));
    }
    if (s.raw_size % w != 0)
      return invalid_input(where + "raw size is not a multiple of the word size");
    if (s.payload_size > container_size - payload_offset)
      return invalid_input(where + "payload runs past the end of the container");
    if (s.method == Method::kStored && s.payload_size != s.raw_size)
      return invalid_input(where + "stored payload size differs from raw size");
    if (s.method == Method::kDeltaPlanes) {
      std::uint64_t end;
      if (add_overflows(s.base_offset, s.raw_size, end) || end > info.base_size) {
        return invalid_input(where + "base range runs past the base's " +
                             std::to_string(info.base_size) + " bytes");
      }
      if (s.changed > s.raw_size / w) return invalid_input(where + "more changed words than words");
    } else if (s.base_offset != 0 || s.changed != 0) {
      return invalid_input(where + "delta fields set on a non-delta section");
    }
    s.raw_offset = raw_offset;
    s.payload_offset = payload_offset;
    if (add_overflows(raw_offset, s.raw_size, raw_offset))
      return invalid_input(where + "raw sizes overflow");
    payload_offset += s.payload_size;
    info.sections.push_back(std::move(s));
  }
  if (at != table_size)
    return invalid_input("section table has " + std::to_string(table_size - at) +
                         " trailing bytes");
  if (raw_offset != info.raw_size) {
    return invalid_input("sections hold " + std::to_string(raw_offset) +
                         " raw bytes but the header declares " + std::to_string(info.raw_size));
  }
  if (payload_offset != container_size)
    return invalid_input("section payloads do not cover the container exactly");
  return info;
}

}  // namespace vt::comp::format
