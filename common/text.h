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

}  // namespace vt
