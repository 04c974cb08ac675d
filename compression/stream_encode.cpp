// The streaming encoder (compression/streaming.h): the sections of encode.cpp, read a window at a
// time from the caller, coded in parallel, written out in order; the head last, at offset 0.

#include <optional>

#include "compression/format.h"
#include "compression/section_codec.h"
#include "compression/section_plan.h"
#include "compression/streaming.h"
#include "fingerprint/merkle.h"

namespace vt::comp {
namespace {

// The end (exclusive) of the window of sections starting at `first`: whole sections, at least
// one, at most `window_bytes` of canonical bytes where more than one fit.
std::size_t window_end(const std::vector<PlannedSection>& sections, std::size_t first,
                       std::uint64_t window_bytes) {
  std::size_t last = first;
  std::uint64_t bytes = 0;
  while (last < sections.size() &&
         (last == first || bytes + sections[last].info.raw_size <= window_bytes)) {
    bytes += sections[last].info.raw_size;
    ++last;
  }
  return last;
}

Result<StreamedContainer> encode_streamed_impl(const CanonicalLayout& layout,
                                               const RangeReader& source, const StreamBase* base,
                                               const EncodeOptions& o, StreamFileWriter& out,
                                               std::uint64_t window_bytes) {
  const int level = o.level != 0 ? o.level : default_level(o.codec);
  VT_RETURN_IF_ERROR(check_options(o, level, base != nullptr));
  if (out.size() != 0) return internal_error("streamed container: the output is not empty");
  const SnapshotLayout mine{layout.data_start(), layout.tensors};
  VT_ASSIGN_OR_RETURN(std::vector<PlannedSection> sections, plan_sections(mine, o.chunk_size));
  if (base != nullptr)
    match_base(sections, mine, SnapshotLayout{base->layout.data_start, base->layout.tensors});

  std::unique_ptr<ThreadPool> owned;
  ThreadPool* pool = resolve_pool(o.pool, o.threads, owned);
  const std::vector<std::uint64_t> slot = payload_slots(sections, o.codec);
  VT_RETURN_IF_ERROR(out.append(Bytes(slot[0])));  // the head's place, written at the end

  fp::MerkleBuilder merkle;
  Bytes window;
  std::vector<Bytes> payloads;
  std::vector<std::optional<Error>> errors;
  std::uint64_t expected_offset = 0;
  for (std::size_t first = 0; first < sections.size();) {
    const std::size_t last = window_end(sections, first, window_bytes);
    const std::uint64_t begin = sections[first].info.raw_offset;
    const std::uint64_t size =
        sections[last - 1].info.raw_offset + sections[last - 1].info.raw_size - begin;
    if (begin != expected_offset)
      return internal_error("streamed container: sections do not tile the snapshot");
    window.resize(size);
    VT_RETURN_IF_ERROR(source(begin, window));
    merkle.append(window, pool);
    payloads.assign(last - first, Bytes());
    errors.assign(last - first, std::nullopt);
    for_each_index(pool, last - first, [&](std::size_t j) {
      PlannedSection& s = sections[first + j];
      thread_local Bytes payload;
      Bytes base_run;
      Status read_base;
      if (base != nullptr && s.base_offset) {
        base_run.resize(s.info.raw_size);
        read_base = base->read(*s.base_offset, base_run);
      }
      Result<std::uint64_t> coded =
          read_base ? code_section(
                          s, ByteSpan(window).subspan(s.info.raw_offset - begin, s.info.raw_size),
                          base_run, o.codec, level, payload)
                    : Result<std::uint64_t>(read_base.error().context("base snapshot"));
      if (coded.ok() && *coded > slot[first + j + 1] - slot[first + j])
        coded = internal_error(s.info.label() + ": payload exceeds its bound");
      if (!coded.ok()) {
        errors[j] = coded.error();
        return;
      }
      payloads[j].assign(payload.begin(), payload.end());
    });
    for (auto& e : errors) {
      if (e) return *e;
    }
    for (Bytes& p : payloads) VT_RETURN_IF_ERROR(out.append(p));
    expected_offset = begin + size;
    first = last;
  }
  if (expected_offset != layout.total_size)
    return internal_error("streamed container: sections do not cover the snapshot");

  StreamedContainer result;
  result.root = merkle.finish();
  if (o.root && *o.root != result.root)
    return internal_error("streamed container: the bytes read have another root than the caller's");
  ContainerInfo& info = result.info;
  info.version = format::kVersion;
  info.codec = o.codec;
  info.raw_size = layout.total_size;
  info.root = result.root;
  if (base != nullptr) {
    info.base_root = base->root;
    info.base_size = base->size;
  }
  info.sections.reserve(sections.size());
  for (PlannedSection& s : sections) info.sections.push_back(std::move(s.info));
  Bytes head = format::write_header_and_table(info);
  if (head.size() != slot[0]) return internal_error("section table size differs from its plan");
  VT_RETURN_IF_ERROR(out.write_at(0, head));
  result.container_size = out.size();
  info.container_size = out.size();
  return result;
}

}  // namespace

Result<StreamedContainer> encode_streamed(const CanonicalLayout& layout, const RangeReader& source,
                                          const StreamBase* base, const EncodeOptions& options,
                                          StreamFileWriter& out, std::uint64_t window_bytes) {
  return guarded_encoding(
      [&] { return encode_streamed_impl(layout, source, base, options, out, window_bytes); });
}

}  // namespace vt::comp
