// Encoder: plans sections along the safetensors layout, codes them in parallel, writes the
// container (docs/container.md).

#include <cstring>
#include <exception>
#include <map>
#include <string>

#include "common/safetensors.h"
#include "compression/container.h"
#include "compression/format.h"
#include "compression/section_codec.h"
#include "fingerprint/merkle.h"

namespace vt::comp {
namespace {

struct PlannedSection {
  SectionInfo info;
  std::optional<std::uint64_t> base_offset;  // a matching run in the base, for delta
};

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

Status check_options(const EncodeOptions& o, int level) {
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
  if (o.codec == Codec::kDelta && o.base.empty())
    return invalid_input("the delta codec needs the base snapshot's bytes");
  if (o.codec != Codec::kDelta && !o.base.empty()) {
    return invalid_input("a base snapshot was given but codec " + std::string(codec_name(o.codec)) +
                         " does not use it");
  }
  return {};
}

std::vector<PlannedSection> plan(const SafetensorsView& view, std::uint64_t chunk_size) {
  std::vector<PlannedSection> out;
  // The safetensors prefix is cut like a tensor: a header may reach 100 MiB
  // (kMaxSafetensorsHeader) while the decoder refuses any section above 64 MiB (kMaxSectionRaw).
  for (std::uint64_t at = 0, chunk = 0; at < view.data_start; at += chunk_size, ++chunk) {
    PlannedSection header;
    header.info.name = "__header__";
    header.info.chunk = static_cast<std::uint32_t>(chunk);
    header.info.word = WordKind::kByte;
    header.info.raw_offset = at;
    header.info.raw_size = std::min(chunk_size, view.data_start - at);
    out.push_back(header);
  }
  for (const TensorEntry& t : view.tensors) {
    WordKind word = word_kind_for(t.dtype);
    for (std::uint64_t at = 0, chunk = 0; at < t.nbytes(); at += chunk_size, ++chunk) {
      PlannedSection s;
      s.info.name = t.name;
      s.info.chunk = static_cast<std::uint32_t>(chunk);
      s.info.word = word;
      s.info.raw_offset = view.data_start + t.begin + at;
      s.info.raw_size = std::min(chunk_size, t.nbytes() - at);
      out.push_back(std::move(s));
    }
  }
  return out;
}

// Points each section at the same bytes of the base when the base has a tensor of the same name,
// dtype and size (and, for the header section, a header of the same size).
void match_base(std::vector<PlannedSection>& sections, const SafetensorsView& after,
                const SafetensorsView& base) {
  std::map<std::string_view, const TensorEntry*> by_name;
  for (const TensorEntry& t : base.tensors) by_name[t.name] = &t;
  for (PlannedSection& s : sections) {
    if (s.info.name == "__header__" && s.info.raw_offset < after.data_start) {
      if (base.data_start == after.data_start) s.base_offset = s.info.raw_offset;
      continue;
    }
    auto it = by_name.find(s.info.name);
    const TensorEntry* mine = after.find(s.info.name);
    if (it == by_name.end() || mine == nullptr) continue;
    const TensorEntry& theirs = *it->second;
    if (theirs.dtype != mine->dtype || theirs.nbytes() != mine->nbytes()) continue;
    s.base_offset =
        base.data_start + theirs.begin + (s.info.raw_offset - after.data_start - mine->begin);
  }
}

// The sections of `view`, numbered, with names the container can hold.
Result<std::vector<PlannedSection>> plan_sections(const SafetensorsView& view,
                                                  std::uint64_t chunk_size) {
  std::vector<PlannedSection> sections = plan(view, chunk_size);
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

// The table's size is known before coding (entries are fixed-size plus names), so every section
// is coded straight into its own slot of the output, sized by its bound; slot[i]..slot[i+1] is
// section i's, slot[0] is where the first payload may start.
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

// Codes section `section` into `payload` (its info's method, payload fields and delta fields
// filled in).
Result<std::uint64_t> code_section(PlannedSection& section, ByteSpan canonical,
                                   const EncodeOptions& o, int level, Bytes& payload) {
  thread_local Bytes alternative;
  SectionInfo& s = section.info;
  ByteSpan raw = canonical.subspan(s.raw_offset, s.raw_size);
  s.method = primary_method(o.codec);
  ByteSpan base;
  if (s.method == Method::kDeltaPlanes) {
    if (section.base_offset) {
      base = o.base.subspan(*section.base_offset, s.raw_size);
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

// The container from its coded payloads, each let go once it is copied: the payloads and the
// output together never hold much more than the container's size.
Bytes join_payloads(std::uint64_t head_size, std::vector<Bytes>& payloads) {
  std::uint64_t total = head_size;
  for (const Bytes& p : payloads) total += p.size();
  Bytes out;
  reserve_large(out, total);
  out.resize(head_size);
  for (Bytes& p : payloads) {
    out.insert(out.end(), p.begin(), p.end());
    Bytes().swap(p);
  }
  return out;
}

Result<Bytes> encode_impl(ByteSpan canonical, const EncodeOptions& o) {
  int level = o.level != 0 ? o.level : default_level(o.codec);
  VT_RETURN_IF_ERROR(check_options(o, level));
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(canonical, Canonical::kRequire));
  VT_ASSIGN_OR_RETURN(std::vector<PlannedSection> sections, plan_sections(view, o.chunk_size));

  std::unique_ptr<ThreadPool> owned;
  ThreadPool* pool = resolve_pool(o.pool, o.threads, owned);

  ContainerInfo info;
  info.version = format::kVersion;
  info.codec = o.codec;
  info.raw_size = canonical.size();
  info.root = o.root ? *o.root : fp::merkle_root(canonical, pool);
  if (o.codec == Codec::kDelta) {
    auto base_view = parse_safetensors(o.base, Canonical::kRequire);
    if (!base_view.ok()) return base_view.error().context("base snapshot");
    match_base(sections, view, *base_view);
    info.base_root = o.base_root ? *o.base_root : fp::merkle_root(o.base, pool);
    info.base_size = o.base.size();
  }

  const std::vector<std::uint64_t> slot = payload_slots(sections, o.codec);
  // Each section's payload in a buffer of its own, then joined: a container-sized buffer of the
  // worst case (incompressible data) would have been as large as the snapshot, and shrinking it
  // to the container a second copy (together 1.7 times a typical state).
  std::vector<Bytes> payloads(sections.size());
  std::vector<std::optional<Error>> errors(sections.size());
  for_each_index(pool, sections.size(), [&](std::size_t i) {
    // Coded where a frame may first take its bound (zero-filled), then kept at its size.
    thread_local Bytes payload;
    auto coded = code_section(sections[i], canonical, o, level, payload);
    if (coded.ok() && *coded > slot[i + 1] - slot[i])
      coded = internal_error(sections[i].info.label() + ": payload exceeds its bound");
    if (!coded.ok()) {
      errors[i] = coded.error();
      return;
    }
    payloads[i].assign(payload.begin(), payload.end());
  });
  for (auto& e : errors) {
    if (e) return *e;
  }
  Bytes out = join_payloads(slot[0], payloads);

  info.sections.reserve(sections.size());
  for (PlannedSection& s : sections) info.sections.push_back(std::move(s.info));
  Bytes head = format::write_header_and_table(info);
  if (head.size() != slot[0]) return internal_error("section table size differs from its plan");
  std::copy(head.begin(), head.end(), out.begin());
  return out;
}

}  // namespace

Result<Bytes> encode(ByteSpan canonical, const EncodeOptions& options) {
  try {
    auto result = encode_impl(canonical, options);
    if (!result.ok()) return result.error().context("encoding container");
    return result;
  } catch (const std::bad_alloc&) {
    return internal_error("encoding container: out of memory");
  } catch (const std::exception& e) {
    return internal_error(std::string("encoding container: ") + e.what());
  }
}

}  // namespace vt::comp
