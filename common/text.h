#pragma once
// Text a peer chose, made safe to put in a message a person reads on a terminal.

#include <cstddef>
#include <string>
#include <string_view>

namespace vt {

// `text` with every control character (C0, DEL, and C1 as UTF-8) written as \xNN or \u00NN, so
// that no escape sequence reaches a terminal, and cut to at most `max_bytes` bytes of the
// original (never inside a UTF-8 sequence) with "..." and the full length appended when cut.
// Messages quote provider-chosen values through this: a 100 MB metadata value stays a line.
std::string printable(std::string_view text, std::size_t max_bytes = 80);

// A size for people: "512 B", "10.33 MiB" (binary units, two decimals). Every human output
// uses it, so a size reads the same in train, inspect, plan and the reports.
std::string size_text(double bytes);
// snprintf of up to four doubles into a string of at most 255 bytes ("%.3g of %.0f").
std::string format_numbers(const char* format, double a, double b = 0.0, double c = 0.0,
                           double d = 0.0);

// "1 epoch", "3 epochs", "0 epochs": a count and its noun, plural unless the count is one.
std::string count_text(double count, std::string_view noun);

}  // namespace vt
