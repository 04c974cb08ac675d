#include "common/text.h"

#include <gtest/gtest.h>

#include <string>

namespace vt {
namespace {

TEST(Printable, PlainTextAndUtf8PassUnchanged) {
  EXPECT_EQ(printable("cuda:0"), "cuda:0");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");
}

TEST(Printable, ControlCharactersAreEscaped) {
  EXPECT_EQ(printable("\x1b[8mhidden"), "\\x1b[8mhidden");
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable("x\x7f\n"), "x\\x7f\\x0a");
  EXPECT_EQ(printable("\xc2\x9b"
                      "31m"),
            "\\u009b31m");                       // C1 CSI as UTF-8
  EXPECT_EQ(printable("\xc2\xa0"), "\xc2\xa0");  // U+00A0 is printable
  EXPECT_EQ(printable("\x9b"
                      "31m"),
            "\\x9b31m");                           // a raw C1 byte, not UTF-8
  EXPECT_EQ(printable("\xe2\x82"), "\\xe2\\x82");  // a cut-off sequence
}

TEST(Printable, LongTextIsCutWithItsLength) {
  const std::string big(1'000'000, 'a');
  const std::string p = printable(big, 10);
  EXPECT_EQ(p, "aaaaaaaaaa... (1000000 bytes)");
  EXPECT_EQ(printable("abc\xe2\x82\xac", 5), "abc... (6 bytes)");  // never half a character
  EXPECT_EQ(printable("abcdef", 6), "abcdef");
}

}  // namespace
}  // namespace vt
