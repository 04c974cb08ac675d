#include "compression/section_plan.h"

#include <map>
#include <string>

#include "compression/format.h"
#include "compression/section_codec.h"

namespace vt::comp {
namespace {

std::vector<PlannedSection> plan(const SnapshotLayout& layout, std::uint64_t chunk_size) {
  std::vector<PlannedSection> out;
  // The safetensors prefix is cut like a tensor: a header may reach 100 MiB
  // (kMaxSafetensorsHeader) while the decoder refuses any section above 64 MiB (kMaxSectionRaw).
  for (std::uint64_t at = 0, chunk = 0; at < layout.data_start; at += chunk_size, ++chunk) {
    PlannedSection header;
    header.info.name = "__header__";
    header.info.chunk = static_cast<std::uint32_t>(chunk);
    header.info.word = WordKind::kByte;
    header.info.raw_offset = at;
    header.info.raw_size = std::min(chunk_size, layout.data_start - at);
    out.push_back(header);
  }
  for (const TensorEntry& t : layout.tensors) {
    WordKind word = word_kind_for(t.dtype);
    for (std::uint64_t at = 0, chunk = 0; at < t.nbytes(); at += chunk_size, ++chunk) {
      PlannedSection s;
      s.info.name = t.name;
      s.info.chunk = static_cast<std::uint32_t>(chunk);
      s.info.word = word;
      s.info.raw_offset = layout.data_start + t.begin + at;
      s.info.raw_size = std::min(chunk_size, t.nbytes() - at);
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace

int default_level(Codec codec) {
  switch (codec) {
    case Codec::kZstd:
      return 3;
    case Codec::kXz:
      return 6;
    default:
      return 1;
  }
}

Method primary_method(Codec codec) {
  switch (codec) {
    case Codec::kRaw:
      return Method::kStored;
    case Codec::kZstd:
      return Method::kZstd;
    case Codec::kPlanes:
      return Method::kPlanes;
    case Codec::kDelta:
      return Method::kDeltaPlanes;
    case Codec::kXz:
      return Method::kXzPlanes;
  }
  return Method::kStored;
}

Status check_options(const EncodeOptions& o, int level, bool has_base) {
  if (o.chunk_size < format::kMinChunkSize || o.chunk_size > format::kMaxSectionRaw ||
      o.chunk_size % 8 != 0) {
    return invalid_input("chunk_size " + std::to_string(o.chunk_size) +
                         " is not a multiple of 8 in [" + std::to_string(format::kMinChunkSize) +
                         ", " + std::to_string(format::kMaxSectionRaw) + "]");
  }
  if (o.codec == Codec::kXz && (level < 0 || level > 9))
    return invalid_input("xz preset must be 0..9, got " + std::to_string(level));
  if ((o.codec == Codec::kZstd || o.codec == Codec::kPlanes || o.codec == Codec::kDelta) &&
      (level < -7 || level > 19)) {
    return invalid_input("zstd level must be -7..19, got " + std::to_string(level));
  }
  if (o.codec == Codec::kDelta && !has_base)
    return invalid_input("the delta codec needs the base snapshot's bytes");
  if (o.codec != Codec::kDelta && has_base) {
    return invalid_input("a base snapshot was given but codec " + std::string(codec_name(o.codec)) +
                         " does not use it");
  }
  return {};
}

Result<std::vector<PlannedSection>> plan_sections(const SnapshotLayout& layout,
                                                  std::uint64_t chunk_size) {
  std::vector<PlannedSection> sections = plan(layout, chunk_size);
  if (sections.size() > UINT32_MAX) return invalid_input("too many sections; raise chunk_size");
  for (std::size_t i = 0; i < sections.size(); ++i) {
    SectionInfo& s = sections[i].info;
    if (s.name.size() > format::kMaxNameSize) {
      return invalid_input("tensor name '" + s.name.substr(0, 64) +
                           "...' is longer than the container's " +
                           std::to_string(format::kMaxNameSize) + "-byte limit");
    }
    s.index = static_cast<std::uint32_t>(i);
  }
  return sections;
}

void match_base(std::vector<PlannedSection>& sections, const SnapshotLayout& after,
                const SnapshotLayout& base) {
  std::map<std::string_view, const TensorEntry*> theirs_by_name, mine_by_name;
  for (const TensorEntry& t : base.tensors) theirs_by_name[t.name] = &t;
  for (const TensorEntry& t : after.tensors) mine_by_name[t.name] = &t;
  for (PlannedSection& s : sections) {
    if (s.info.name == "__header__" && s.info.raw_offset < after.data_start) {
      if (base.data_start == after.data_start) s.base_offset = s.info.raw_offset;
      continue;
    }
    auto it = theirs_by_name.find(s.info.name);
    auto mine_it = mine_by_name.find(s.info.name);
    if (it == theirs_by_name.end() || mine_it == mine_by_name.end()) continue;
    const TensorEntry& theirs = *it->second;
    const TensorEntry& mine = *mine_it->second;
    if (theirs.dtype != mine.dtype || theirs.nbytes() != mine.nbytes()) continue;
    s.base_offset =
        base.data_start + theirs.begin + (s.info.raw_offset - after.data_start - mine.begin);
  }
}

// The table's size is known before coding (entries are fixed-size plus names).
std::vector<std::uint64_t> payload_slots(const std::vector<PlannedSection>& sections, Codec codec) {
  std::uint64_t table_size = 0;
  std::vector<std::uint64_t> slot(sections.size() + 1);
  slot[0] = format::kHeaderSize;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    table_size += format::kEntryFixedSize + sections[i].info.name.size();
    slot[i + 1] = slot[i] + payload_bound(codec, sections[i].info.word, sections[i].info.raw_size);
  }
  for (std::uint64_t& at : slot) at += table_size;
  return slot;
}

Result<std::uint64_t> code_section(PlannedSection& section, ByteSpan raw, ByteSpan base_run,
                                   Codec codec, int level, Bytes& payload) {
  thread_local Bytes alternative;
  SectionInfo& s = section.info;
  s.method = primary_method(codec);
  ByteSpan base;
  if (s.method == Method::kDeltaPlanes) {
    if (section.base_offset) {
      base = base_run;
    } else {
      s.method = Method::kPlanes;
    }
  }
  auto changed = encode_section(s.method, s.word, raw, base, level, payload);
  // A delta of unrelated values (optimizer moments re-estimated over an epoch) codes worse
  // than the values themselves; keep whichever is smaller.
  if (changed.ok() && s.method == Method::kDeltaPlanes && payload.size() > s.raw_size / 2) {
    auto planes = encode_section(Method::kPlanes, s.word, raw, {}, level, alternative);
    if (planes.ok() && alternative.size() < payload.size()) {
      s.method = Method::kPlanes;
      changed = planes;
      payload.swap(alternative);
    }
  }
  if (!changed.ok()) return changed.error().context(s.label());
  if (s.method == Method::kDeltaPlanes) {
    s.base_offset = *section.base_offset;
    s.changed = *changed;
  }
  s.payload_size = payload.size();
  s.payload_xxh3 = format::xxh3(payload);
  s.raw_xxh3 = format::xxh3(raw);
  return payload.size();
}

}  // namespace vt::comp
