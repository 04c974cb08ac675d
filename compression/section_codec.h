#pragma once
// Coding of one section's bytes by method (docs/container.md, "Section payloads").

#include <cstdint>
#include <memory>
#include <span>

#include "common/thread_pool.h"
#include "compression/container.h"

namespace vt::comp {

// Replaces `payload` with the coded section and returns the number of changed words (kDeltaPlanes;
// 0 otherwise). `base` is the matching run of the base snapshot for kDeltaPlanes, else empty.
// The caller keeps `payload` between calls so its memory is reused.
Result<std::uint64_t> encode_section(Method method, WordKind word, ByteSpan raw, ByteSpan base,
                                     int level, Bytes& payload);

// An upper bound on the payload size of a section with `raw_size` bytes, for any method a codec
// may choose for it.
std::uint64_t payload_bound(Codec codec, WordKind word, std::uint64_t raw_size);

// Decodes `payload` into `out` (exactly the section's raw size). `base` as for encode_section.
Status decode_section(const SectionInfo& section, ByteSpan payload, ByteSpan base,
                      std::span<std::uint8_t> out);

// The pool to run sections on: `given`, or a new one owned by `owned` for `threads` threads
// counting the caller, or none (run on the caller) for threads == 1.
ThreadPool* resolve_pool(ThreadPool* given, std::size_t threads,
                         std::unique_ptr<ThreadPool>& owned);
void for_each_index(ThreadPool* pool, std::size_t n, const std::function<void(std::size_t)>& fn);

}  // namespace vt::comp
