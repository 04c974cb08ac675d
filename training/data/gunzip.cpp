#include "training/data/gunzip.h"

#include <zlib.h>

#include <memory>

namespace vt::training {

Result<Bytes> gunzip(ByteSpan compressed, std::uint64_t max_output, const std::string& what) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
    return internal_error(what + ": zlib inflateInit2 failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
  Bytes out;
  std::size_t in_at = 0;
  std::uint8_t chunk[1 << 16];
  int rc = Z_OK;
  while (true) {
    if (z.avail_in == 0) {
      // avail_in is 32-bit: feed at most 1 GiB at a time.
      const std::size_t n = std::min<std::size_t>(compressed.size() - in_at, std::size_t{1} << 30);
      z.next_in = const_cast<Bytef*>(compressed.data() + in_at);
      z.avail_in = static_cast<uInt>(n);
      in_at += n;
    }
    z.next_out = chunk;
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    // No progress possible with every byte consumed and the stream not ended: the file stops
    // mid-stream (the usual shape of an interrupted download), not a corrupt one.
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && in_at == compressed.size()) {
      return invalid_input(
          what + ": truncated gzip file (it ends before the end of its compressed stream)");
    }
    if (rc != Z_OK && rc != Z_STREAM_END) {
      return invalid_input(what + ": not a valid gzip file (" +
                           (z.msg ? z.msg : "zlib error " + std::to_string(rc)) + ")");
    }
    const std::size_t produced = sizeof chunk - z.avail_out;
    if (out.size() + produced > max_output) {
      return invalid_input(what + ": decompresses to more than " + std::to_string(max_output) +
                           " bytes");
    }
    out.insert(out.end(), chunk, chunk + produced);
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0 && in_at == compressed.size()) break;
      inflateReset(&z);  // another gzip member follows
      continue;
    }
    if (z.avail_in == 0 && in_at == compressed.size() && produced == 0) {
      return invalid_input(what + ": truncated gzip file");
    }
  }
  return out;
}

}  // namespace vt::training
