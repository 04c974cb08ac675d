#include "common/text.h"

#include <cstdio>

namespace vt {
namespace {

// Length of the UTF-8 sequence starting with `lead`, or 1 for a byte that does not start one
// (continuation bytes and invalid leads are escaped one by one).
std::size_t sequence_length(unsigned char lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 1;
}

bool well_formed(std::string_view text, std::size_t at, std::size_t length) {
  if (at + length > text.size()) return false;
  for (std::size_t i = 1; i < length; ++i) {
    if ((static_cast<unsigned char>(text[at + i]) & 0xC0) != 0x80) return false;
  }
  return true;
}

void escape_byte(std::string& out, unsigned char c, const char* format) {
  char buf[8];
  std::snprintf(buf, sizeof buf, format, static_cast<unsigned>(c));
  out += buf;
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size() && at < max_bytes) {
    const auto c = static_cast<unsigned char>(text[at]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F) {
        escape_byte(out, c, "\\x%02x");
      } else {
        out += static_cast<char>(c);
      }
      ++at;
      continue;
    }
    const std::size_t n = sequence_length(c);
    if (n == 1 || !well_formed(text, at, n)) {
      escape_byte(out, c, "\\x%02x");
      ++at;
      continue;
    }
    if (at + n > max_bytes) break;
    const auto second = static_cast<unsigned char>(text[at + 1]);
    if (c == 0xC2 && second < 0xA0) {  // U+0080..U+009F: C1 controls, 0x9B is a CSI
      escape_byte(out, second, "\\u%04x");
    } else {
      out.append(text.substr(at, n));
    }
    at += n;
  }
  if (at < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string size_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 6) {
    bytes /= 1024.0;
    ++u;
  }
  char text[64];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return text;
}

std::string count_text(double count, std::string_view noun) {
  char number[32];
  std::snprintf(number, sizeof number, "%.0f", count);
  return std::string(number) + " " + std::string(noun) + (count == 1.0 ? "" : "s");
}

std::string format_numbers(const char* format, double a, double b, double c, double d) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

}  // namespace vt
