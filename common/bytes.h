#pragma once
// Byte buffers, hex and little-endian helpers shared by every module.

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace vt {

using Bytes = std::vector<std::uint8_t>;
using ByteSpan = std::span<const std::uint8_t>;
using Digest = std::array<std::uint8_t, 32>;  // a SHA-256 output

inline ByteSpan as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

std::string hex_encode(ByteSpan bytes);
inline std::string hex_encode(const Digest& d) { return hex_encode(ByteSpan(d)); }
Result<Bytes> hex_decode(std::string_view hex);
// RFC 4648 base64 with padding (operand values in operator evidence: a third smaller than hex).
std::string base64_encode(ByteSpan bytes);
// Strict: the standard alphabet, padded to a multiple of 4, no blanks.
Result<Bytes> base64_decode(std::string_view text);
// Parses exactly 64 hex digits; `what` names the field in the error.
Result<Digest> digest_from_hex(std::string_view hex, std::string_view what);

inline void put_u32le(std::uint8_t* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline void put_u64le(std::uint8_t* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline std::uint32_t get_u32le(const std::uint8_t* in) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | in[i];
  return v;
}
inline std::uint64_t get_u64le(const std::uint8_t* in) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | in[i];
  return v;
}
inline void append_u32le(Bytes& out, std::uint32_t v) {
  out.resize(out.size() + 4);
  put_u32le(out.data() + out.size() - 4, v);
}
inline void append_u64le(Bytes& out, std::uint64_t v) {
  out.resize(out.size() + 8);
  put_u64le(out.data() + out.size() - 8, v);
}
inline void append_bytes(Bytes& out, ByteSpan bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}

// reserve() for buffers of many megabytes (a snapshot being downloaded or decoded): also asks
// the kernel for transparent huge pages over the new storage, so filling it takes one page
// fault per 2 MiB instead of one per 4 KiB. Only a hint; without THP it is a plain reserve().
void reserve_large(Bytes& bytes, std::size_t capacity);

}  // namespace vt
