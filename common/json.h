#pragma once
// Canonical JSON: the byte form that ids and signatures are taken over (docs/task.md,
// docs/log.md). Keys sorted bytewise at every level (nlohmann::json keeps objects in a
// std::map), no whitespace, and every number with exactly one spelling, so that an independent
// writer (Python's json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
// produces the same bytes: integers in decimal, finite doubles as json_double_text() below.
// nlohmann's own dump() prints doubles with Grisu2, which is not always the shortest form and
// switches to exponents at 1e15, so it is used here for strings, integers and literals only.
//
// Every JSON text a peer or a provider wrote (log records, frames, the task, safetensors headers,
// evidence, verdicts) is parsed through parse_json_bounded(): nlohmann's parser is iterative, but
// dump(), copies and comparisons recurse, so a document nested 100,000 deep would overflow the
// stack on the first walk. The depth is checked on the raw text before nlohmann sees it.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace vt {

// The spelling of Python's repr(float): the shortest decimal that reads back to the same
// double (the closest to it when several are that short), in fixed notation with at least one
// fractional digit when its decimal exponent is in -4..15 ("0.0001", "1e+16" -> "1e+16",
// "2.0"), else as d[.ddd]e±XX with at least two exponent digits ("1e-05", "1.5e+16").
// Not finite: "null", as nlohmann writes it.
inline std::string json_double_text(double v) {
  if (!std::isfinite(v)) return "null";
  if (v == 0.0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  // Shortest round-trip digits, closest to the value on ties (C++17 [charconv.to.chars]).
  const auto end =
      std::to_chars(buf, buf + sizeof buf, std::fabs(v), std::chars_format::scientific).ptr;
  const std::string sci(buf, end);  // "d.ddde+XX" or "de-XX"
  const std::size_t e = sci.find('e');
  int exp = 0;
  std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exp);
  const std::string digits = sci.substr(0, 1) + (e > 1 ? sci.substr(2, e - 2) : "");
  const auto count = static_cast<int>(digits.size());
  // Appends only: GCC 12 warns (-Wrestrict, falsely) on "literal" + std::string temporaries.
  std::string out = v < 0 ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out.append("0.").append(static_cast<std::size_t>(-exp - 1), '0').append(digits);
    } else if (count <= exp + 1) {
      out.append(digits).append(static_cast<std::size_t>(exp + 1 - count), '0').append(".0");
    } else {
      const std::size_t whole = static_cast<std::size_t>(exp) + 1;  // digits before the point
      out.append(digits, 0, whole).append(".").append(digits, whole);
    }
    return out;
  }
  out.append(digits, 0, 1);
  if (count > 1) out.append(".").append(digits, 1);
  const std::string magnitude = std::to_string(std::abs(exp));
  out.append(exp < 0 ? "e-" : "e+");
  if (magnitude.size() < 2) out.append("0");
  return out.append(magnitude);
}

// A string as dump() writes it. Text that needs no escape (printable ASCII but for the quote and
// the backslash: hex, base64, names) is copied as it is, without dump()'s per-character decoder,
// which costs 10 ns a character in a megabyte of base64 operand values.
inline void append_json_string(const std::string& s, std::string& out) {
  const bool plain = std::all_of(
      s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\'; });
  if (!plain) {
    out += nlohmann::json(s).dump();
    return;
  }
  out.reserve(out.size() + s.size() + 2);
  out += '"';
  out += s;
  out += '"';
}

inline void append_canonical_json(const nlohmann::json& value, std::string& out) {
  switch (value.type()) {
    case nlohmann::json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        if (!first) out += ',';
        first = false;
        append_json_string(key, out);
        out += ':';
        append_canonical_json(item, out);
      }
      out += '}';
      return;
    }
    case nlohmann::json::value_t::array: {
      out += '[';
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (i > 0) out += ',';
        append_canonical_json(value[i], out);
      }
      out += ']';
      return;
    }
    case nlohmann::json::value_t::number_float:
      out += json_double_text(value.get<double>());
      return;
    case nlohmann::json::value_t::string:
      append_json_string(value.get_ref<const std::string&>(), out);
      return;
    default:
      out += value.dump();
      return;
  }
}

// Deeper than any format of ours nests (a task is 4 levels, a verdict 5), far below what
// recursion over a tree can take on a default thread stack.
inline constexpr std::size_t kMaxJsonDepth = 64;

inline std::string canonical_json(const nlohmann::json& value) {
  // Strict UTF-8: invalid input throws inside dump(), so the caller validated strings already.
  std::string out;
  append_canonical_json(value, out);
  return out;
}

// The deepest nesting of arrays and objects in `text`, counted without parsing (brackets inside
// strings do not count); stops counting once `limit` is passed and returns limit + 1.
std::size_t json_nesting_depth(std::string_view text, std::size_t limit = kMaxJsonDepth);

// Parses without exceptions; `what` names the file or message in the error. Refuses a text
// nested deeper than `max_depth` before building any tree. `callback`, if given, sees each
// parse event (as nlohmann's parser callback) and can veto a value.
Result<nlohmann::json> parse_json_bounded(
    std::string_view text, std::string_view what, std::size_t max_depth = kMaxJsonDepth,
    const nlohmann::json::parser_callback_t& callback = nullptr);

inline Result<nlohmann::json> parse_json(std::string_view text, std::string_view what) {
  return parse_json_bounded(text, what);
}

}  // namespace vt
