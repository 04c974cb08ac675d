#include "compression/section_codec.h"

#include <lzma.h>
#include <zstd.h>

#include <algorithm>
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

Result<std::uint64_t> encode_section(Method method, WordKind word, ByteSpan raw, ByteSpan base,
                                     int level, Bytes& payload) {
  payload.clear();
  std::uint64_t changed = 0;
  std::size_t w = word_size(word);
  std::size_t n = raw.size() / w;
  switch (method) {
    case Method::kStored:
      payload.assign(raw.begin(), raw.end());
      break;
    case Method::kZstd:
      append_zstd_frame(payload, raw, level);
      break;
    case Method::kPlanes: {
      auto planes = scratch_span(0, raw.size());
      split_planes(word, raw, planes);
      for (std::size_t p = 0; p < w; ++p)
        append_zstd_frame(payload, planes.subspan(p * n, n), level, ZstdTuning::kLiterals);
      break;
    }
    case Method::kDeltaPlanes: {
      if (base.size() != raw.size())
        return internal_error("delta section without a matching base range");
      auto mask = scratch_span(1, (n + 7) / 8);
      auto diffs = scratch_span(0, raw.size());
      changed = delta_planes(word, raw, base, mask, diffs);
      append_zstd_frame(payload, mask, level);  // masks have runs: default matcher
      if (changed) {
        for (std::size_t p = 0; p < w; ++p) {
          append_zstd_frame(payload, diffs.subspan(p * changed, changed), level,
                            ZstdTuning::kLiterals);
        }
      }
      break;
    }
    case Method::kXzPlanes: {
      auto planes = scratch_span(0, raw.size());
      split_planes(word, raw, planes);
      VT_RETURN_IF_ERROR(append_xz_stream(payload, planes, level));
      break;
    }
  }
  return changed;
}

std::uint64_t payload_bound(Codec codec, WordKind word, std::uint64_t raw_size) {
  std::uint64_t w = word_size(word), n = raw_size / w;
  std::uint64_t planes = w * ZSTD_compressBound(n);
  switch (codec) {
    case Codec::kRaw:
      return raw_size;
    case Codec::kZstd:
      return ZSTD_compressBound(raw_size);
    case Codec::kPlanes:
      return planes;
    case Codec::kDelta:
      return std::max(planes, ZSTD_compressBound((n + 7) / 8) + planes);
    case Codec::kXz:
      return lzma_stream_buffer_bound(raw_size);
  }
  return 0;
}

Status decode_section(const SectionInfo& s, ByteSpan payload, ByteSpan base,
                      std::span<std::uint8_t> out) {
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
      if (base.size() != out.size())
        return internal_error("delta section without a matching base range");
      std::size_t mask_size = (n + 7) / 8;
      // s.changed <= n was checked by the parser, so this stays within the section's bound.
      auto buffer = scratch_span(0, mask_size + s.changed * w);
      VT_RETURN_IF_ERROR(zstd_decode_exact(payload, buffer));
      return undelta_planes(s.word, base, buffer.first(mask_size), buffer.subspan(mask_size),
                            s.changed, out);
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

ThreadPool* resolve_pool(ThreadPool* given, std::size_t threads,
                         std::unique_ptr<ThreadPool>& owned) {
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
