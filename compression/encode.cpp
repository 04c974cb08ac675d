// Encoder: plans sections along the safetensors layout, codes them in parallel, writes the
// container (docs/container.md).

#include <cstring>
#include <string>

#include "common/safetensors.h"
#include "compression/container.h"
#include "compression/format.h"
#include "compression/section_codec.h"
#include "compression/section_plan.h"
#include "fingerprint/merkle.h"

namespace vt::comp {
namespace {

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
  VT_RETURN_IF_ERROR(check_options(o, level, !o.base.empty()));
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(canonical, Canonical::kRequire));
  const SnapshotLayout layout{view.data_start, view.tensors};
  VT_ASSIGN_OR_RETURN(std::vector<PlannedSection> sections, plan_sections(layout, o.chunk_size));

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
    match_base(sections, layout, SnapshotLayout{base_view->data_start, base_view->tensors});
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
    const SectionInfo& planned = sections[i].info;
    const std::optional<std::uint64_t>& base_at = sections[i].base_offset;
    auto coded = code_section(sections[i], canonical.subspan(planned.raw_offset, planned.raw_size),
                              base_at ? o.base.subspan(*base_at, planned.raw_size) : ByteSpan(),
                              o.codec, level, payload);
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
  return guarded_encoding([&] { return encode_impl(canonical, options); });
}

}  // namespace vt::comp
