#include "common/bytes.h"

#include <openssl/evp.h>
#include <sys/mman.h>

#include <cctype>
#include <limits>

namespace vt {

void reserve_large(Bytes& bytes, std::size_t capacity) {
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
  const bool fresh = bytes.capacity() < capacity;
  bytes.reserve(capacity);
  if (!fresh || capacity < 2 * kHugePage) return;
  // Only the untouched part past size() is advised: pages already written stay as they are.
  auto begin = reinterpret_cast<std::uintptr_t>(bytes.data() + bytes.size());
  auto end = reinterpret_cast<std::uintptr_t>(bytes.data() + bytes.capacity());
  begin = (begin + kHugePage - 1) & ~(kHugePage - 1);
  end &= ~(kHugePage - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

std::string hex_encode(ByteSpan bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return out;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<Bytes> hex_decode(std::string_view hex) {
  if (hex.size() % 2 != 0) {
    return invalid_input("hex string has odd length " + std::to_string(hex.size()));
  }
  Bytes out(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    int hi = hex_value(hex[2 * i]);
    int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return invalid_input("not a hex digit at offset " +
                           std::to_string(hi < 0 ? 2 * i : 2 * i + 1));
    }
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return out;
}

std::string base64_encode(ByteSpan bytes) {
  std::string out((bytes.size() + 2) / 3 * 4, '\0');
  if (!bytes.empty()) {
    EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(),
                    static_cast<int>(bytes.size()));
  }
  return out;
}

Result<Bytes> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0)
    return invalid_input("base64 text of " + std::to_string(text.size()) +
                         " characters is not a multiple of 4");
  if (text.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    return invalid_input("base64 text longer than 2 GiB");
  std::size_t padding = 0;
  while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') ++padding;
  for (std::size_t i = 0; i + padding < text.size(); ++i) {
    const char c = text[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/'))
      return invalid_input("not a base64 character at offset " + std::to_string(i));
  }
  Bytes out(text.size() / 4 * 3);
  if (!text.empty() &&
      EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()),
                      static_cast<int>(text.size())) < 0)
    return invalid_input("malformed base64");
  out.resize(out.size() - padding);
  return out;
}

Result<Digest> digest_from_hex(std::string_view hex, std::string_view what) {
  if (hex.size() != 64) {
    return invalid_input(std::string(what) + ": expected 64 hex digits (a SHA-256), got " +
                         std::to_string(hex.size()) + " characters");
  }
  auto bytes = hex_decode(hex);
  if (!bytes) return bytes.error().context(what);
  Digest d;
  std::memcpy(d.data(), bytes->data(), d.size());
  return d;
}

}  // namespace vt
