#include "compression/section_codec.h"

#include <string>

#include "compression/frames.h"

namespace vt::comp {
namespace {

// Per-thread scratch for the transformed words; sections are at most 64 MiB, so this stays
// bounded, and reusing it avoids a page-faulting allocation per section.
Bytes& scratch(int which) {
  thread_local Bytes buffers[2];
  return buffers[which];
}

std::span<std::uint8_t> scratch_span(int which, std::size_t size) {
  Bytes& b = scratch(which);
  if (b.size() < size) b.resize(size);
  return {b.data(), size};
}

}  // namespace

Result<CodedSection> encode_section(Method method, WordKind word, ByteSpan raw, ByteSpan base, int level) {
  CodedSection coded;
  std::size_t w = word_size(word);
  std::size_t n = raw.size() / w;
  switch (method) {
    case Method::kStored:
      coded.payload.assign(raw.begin(), raw.end());
      break;
    case Method::kZstd:
      append_zstd_frame(coded.payload, raw, level);
      break;
    case Method::kPlanes: {
      auto planes = scratch_span(0, raw.size());
      split_planes(word, raw, planes);
      coded.payload.reserve(raw.size() + 64);
      for (std::size_t p = 0; p < w; ++p) append_zstd_frame(coded.payload, planes.subspan(p * n, n), level);
      break;
    }
    case Method::kDeltaPlanes: {
      if (base.size() != raw.size()) return internal_error("delta section without a matching base range");
      auto mask = scratch_span(1, (n + 7) / 8);
      auto diffs = scratch_span(0, raw.size());
      coded.changed = delta_planes(word, raw, base, mask, diffs);
      append_zstd_frame(coded.payload, mask, level);
      if (coded.changed) {
        for (std::size_t p = 0; p < w; ++p) {
          append_zstd_frame(coded.payload, diffs.subspan(p * coded.changed, coded.changed), level);
        }
      }
      break;
    }
    case Method::kXzPlanes: {
      auto planes = scratch_span(0, raw.size());
      split_planes(word, raw, planes);
      VT_RETURN_IF_ERROR(append_xz_stream(coded.payload, planes, level));
      break;
    }
  }
  return coded;
}

Status decode_section(const SectionInfo& s, ByteSpan payload, ByteSpan base, std::span<std::uint8_t> out) {
  std::size_t w = word_size(s.word);
  std::size_t n = out.size() / w;
  switch (s.method) {
    case Method::kStored:
      std::copy(payload.begin(), payload.end(), out.begin());
      return {};
    case Method::kZstd:
      return zstd_decode_exact(payload, out);
    case Method::kPlanes: {
      auto planes = scratch_span(0, out.size());
      VT_RETURN_IF_ERROR(zstd_decode_exact(payload, planes));
      merge_planes(s.word, planes, out);
      return {};
    }
    case Method::kDeltaPlanes: {
      if (base.size() != out.size()) return internal_error("delta section without a matching base range");
      std::size_t mask_size = (n + 7) / 8;
      // s.changed <= n was checked by the parser, so this stays within the section's bound.
      auto buffer = scratch_span(0, mask_size + s.changed * w);
      VT_RETURN_IF_ERROR(zstd_decode_exact(payload, buffer));
      return undelta_planes(s.word, base, buffer.first(mask_size), buffer.subspan(mask_size), s.changed, out);
    }
    case Method::kXzPlanes: {
      auto planes = scratch_span(0, out.size());
      VT_RETURN_IF_ERROR(xz_decode_exact(payload, planes));
      merge_planes(s.word, planes, out);
      return {};
    }
  }
  return internal_error("unknown section method");
}

ThreadPool* resolve_pool(ThreadPool* given, std::size_t threads, std::unique_ptr<ThreadPool>& owned) {
  if (given) return given;
  if (threads == 0) threads = hardware_threads();
  if (threads <= 1) return nullptr;
  // parallel_for also runs jobs on the calling thread, so the pool needs one thread fewer.
  owned = std::make_unique<ThreadPool>(threads - 1);
  return owned.get();
}

void for_each_index(ThreadPool* pool, std::size_t n, const std::function<void(std::size_t)>& fn) {
  if (pool) {
    pool->parallel_for(n, fn);
  } else {
    for (std::size_t i = 0; i < n; ++i) fn(i);
  }
}

}  // namespace vt::comp
