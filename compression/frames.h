#pragma once
// Standard zstd and xz frames, so that a section extracted from a container decodes with the
// `zstd -d` and `xz -d` command-line tools (docs/container.md, "Sections").

#include <cstdint>
#include <span>

#include "common/bytes.h"

namespace vt::comp {

// kLiterals is for byte planes of numbers: they are nearly memoryless, so LZ matches rarely pay
// and short ones cost more than the literals they replace. The matcher is limited to 7-byte
// matches over a 256-entry hash table and Huffman coding of literals does the work; measured on
// an f32 exponent plane (entropy 2.77 bits) this gives 2.81 bits/byte at ~900 MB/s where plain
// level 1 gives 3.19 bits at ~250 MB/s. A plane whose sampled byte entropy is near 8 bits (low
// mantissa bytes) goes straight to raw blocks without a compression attempt.
enum class ZstdTuning { kDefault, kLiterals };

// Appends one zstd frame holding `in` (with its content size) at `level`. When compression does
// not shrink the input, the frame is written with raw blocks instead: the bytes are stored as
// they are, decoding is a copy, and the frame is still one that any zstd decoder accepts.
void append_zstd_frame(Bytes& out, ByteSpan in, int level,
                       ZstdTuning tuning = ZstdTuning::kDefault);
// Appends a frame of raw blocks without trying to compress.
void append_raw_zstd_frame(Bytes& out, ByteSpan in);

// Decodes one or more concatenated zstd frames whose contents add up to exactly `out.size()`.
// Refuses frames that do not declare their content size, so nothing is decoded past `out`.
Status zstd_decode_exact(ByteSpan frames, std::span<std::uint8_t> out);
// Total content size declared by the concatenated frames; an error if malformed.
Result<std::uint64_t> zstd_content_size(ByteSpan frames);

// Appends one xz stream (CRC32 check) holding `in` at `preset` (0-9).
Status append_xz_stream(Bytes& out, ByteSpan in, int preset);
// Decodes exactly one xz stream whose content is exactly `out.size()` bytes.
Status xz_decode_exact(ByteSpan stream, std::span<std::uint8_t> out);

}  // namespace vt::comp
