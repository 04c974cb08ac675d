#include "compression/frames.h"

#include <lzma.h>
#include <zstd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

namespace vt::comp {
namespace {

struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// One context per thread: the pool threads live as long as the process, and creating a context
// per section would cost more than coding a small section.
ZSTD_CCtx* thread_cctx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxFree> cctx(ZSTD_createCCtx());
  return cctx.get();
}
ZSTD_DCtx* thread_dctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
  return dctx.get();
}

constexpr std::size_t kMaxRawBlock = 128u << 10;  // RFC 8878 Block_Maximum_Size

std::size_t raw_frame_size(std::size_t n) {
  std::size_t blocks = n == 0 ? 1 : (n + kMaxRawBlock - 1) / kMaxRawBlock;
  return 13 + 3 * blocks + n;
}

// Order-0 entropy, in bits per byte, of about 64 KiB of `in` sampled at an even stride.
double sampled_entropy(ByteSpan in) {
  std::size_t stride = std::max<std::size_t>(1, in.size() / (64u << 10));
  std::uint32_t hist[256] = {};
  std::size_t count = 0;
  for (std::size_t i = 0; i < in.size(); i += stride, ++count) ++hist[in[i]];
  double h = 0;
  for (std::uint32_t c : hist) {
    if (c) h -= c * std::log2(static_cast<double>(c) / count);
  }
  return h / count;
}

// Above this, Huffman can not shorten any byte value's code below 8 bits, and a plane of numbers
// has no long repeats for the restricted matcher to find: trying zstd would only cost time.
constexpr double kIncompressibleBits = 7.9;

}  // namespace

void append_raw_zstd_frame(Bytes& out, ByteSpan in) {
  // RFC 8878: magic, a descriptor with Single_Segment set and an 8-byte Frame_Content_Size, then
  // raw blocks of at most 128 KiB, each behind a 3-byte header (last flag, type 0, size).
  std::size_t blocks = in.empty() ? 1 : (in.size() + kMaxRawBlock - 1) / kMaxRawBlock;
  std::size_t start = out.size();
  out.resize(start + raw_frame_size(in.size()));
  std::uint8_t* p = out.data() + start;
  put_u32le(p, ZSTD_MAGICNUMBER);
  p[4] = 0xE0;  // FCS_Field_Size = 3 (8 bytes), Single_Segment = 1, no checksum, no dictionary
  put_u64le(p + 5, in.size());
  p += 13;
  std::size_t pos = 0;
  for (std::size_t b = 0; b < blocks; ++b) {
    std::size_t len = std::min(kMaxRawBlock, in.size() - pos);
    std::uint32_t header = static_cast<std::uint32_t>(len << 3) | (b + 1 == blocks ? 1u : 0u);
    p[0] = static_cast<std::uint8_t>(header);
    p[1] = static_cast<std::uint8_t>(header >> 8);
    p[2] = static_cast<std::uint8_t>(header >> 16);
    if (len) std::memcpy(p + 3, in.data() + pos, len);
    p += 3 + len;
    pos += len;
  }
}

void append_zstd_frame(Bytes& out, ByteSpan in, int level, ZstdTuning tuning) {
  if (tuning == ZstdTuning::kLiterals && in.size() >= 4096 &&
      sampled_entropy(in) >= kIncompressibleBits) {
    append_raw_zstd_frame(out, in);
    return;
  }
  std::size_t start = out.size();
  out.resize(start + ZSTD_compressBound(in.size()));
  ZSTD_CCtx* cctx = thread_cctx();
  ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  if (tuning == ZstdTuning::kLiterals) {
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_minMatch, 7);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_hashLog, 8);
  }
  std::size_t n =
      ZSTD_compress2(cctx, out.data() + start, out.size() - start, in.data(), in.size());
  if (ZSTD_isError(n) || n >= raw_frame_size(in.size())) {
    out.resize(start);
    append_raw_zstd_frame(out, in);
    return;
  }
  out.resize(start + n);
}

Result<std::uint64_t> zstd_content_size(ByteSpan frames) {
  // Walks the frames with the stable API (ZSTD_findDecompressedSize is static-linking only).
  std::uint64_t total = 0;
  for (std::size_t at = 0; at < frames.size();) {
    const std::uint8_t* p = frames.data() + at;
    std::size_t left = frames.size() - at;
    unsigned long long size = ZSTD_getFrameContentSize(p, left);
    if (size == ZSTD_CONTENTSIZE_ERROR)
      return invalid_input("not a zstd frame at byte " + std::to_string(at));
    if (size == ZSTD_CONTENTSIZE_UNKNOWN)
      return invalid_input("zstd frame at byte " + std::to_string(at) +
                           " does not declare its content size");
    std::size_t len = ZSTD_findFrameCompressedSize(p, left);
    if (ZSTD_isError(len))
      return invalid_input("zstd frame at byte " + std::to_string(at) + " is truncated or corrupt");
    if (size > UINT64_MAX - total) return invalid_input("zstd frame sizes overflow");
    total += size;
    at += len;
  }
  if (frames.empty()) return invalid_input("no zstd frame");
  return total;
}

Status zstd_decode_exact(ByteSpan frames, std::span<std::uint8_t> out) {
  VT_ASSIGN_OR_RETURN(std::uint64_t declared, zstd_content_size(frames));
  if (declared != out.size()) {
    return invalid_input("zstd frames declare " + std::to_string(declared) + " bytes, expected " +
                         std::to_string(out.size()));
  }
  std::size_t n =
      ZSTD_decompressDCtx(thread_dctx(), out.data(), out.size(), frames.data(), frames.size());
  if (ZSTD_isError(n)) return invalid_input(std::string("zstd: ") + ZSTD_getErrorName(n));
  if (n != out.size()) {
    return invalid_input("zstd frames decoded to " + std::to_string(n) + " bytes, expected " +
                         std::to_string(out.size()));
  }
  return {};
}

Status append_xz_stream(Bytes& out, ByteSpan in, int preset) {
  std::size_t start = out.size();
  out.resize(start + lzma_stream_buffer_bound(in.size()));
  std::size_t pos = 0;
  lzma_ret ret =
      lzma_easy_buffer_encode(static_cast<std::uint32_t>(preset), LZMA_CHECK_CRC32, nullptr,
                              in.data(), in.size(), out.data() + start, &pos, out.size() - start);
  if (ret != LZMA_OK) {
    out.resize(start);
    return internal_error("xz encoder failed with code " + std::to_string(ret));
  }
  out.resize(start + pos);
  return {};
}

Status xz_decode_exact(ByteSpan stream, std::span<std::uint8_t> out) {
  // 256 MiB covers the dictionary of every preset (9 uses 64 MiB); a hostile stream asking for
  // more is refused instead of allocated.
  std::uint64_t memlimit = 256u << 20;
  std::size_t in_pos = 0, out_pos = 0;
  lzma_ret ret = lzma_stream_buffer_decode(&memlimit, 0, nullptr, stream.data(), &in_pos,
                                           stream.size(), out.data(), &out_pos, out.size());
  if (ret == LZMA_BUF_ERROR)
    return invalid_input("xz stream is truncated or decodes to more than " +
                         std::to_string(out.size()) + " bytes");
  if (ret != LZMA_OK)
    return invalid_input("xz stream is corrupt (liblzma code " + std::to_string(ret) + ")");
  if (out_pos != out.size() || in_pos != stream.size()) {
    return invalid_input("xz stream decoded to " + std::to_string(out_pos) + " bytes, expected " +
                         std::to_string(out.size()));
  }
  return {};
}

}  // namespace vt::comp
