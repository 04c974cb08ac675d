#include "common/result.h"

#include <gtest/gtest.h>

namespace vt {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_input("value " + std::to_string(v) + " is not positive");
  return v;
}

Result<int> doubled(int v) {
  VT_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check(int v) {
  VT_RETURN_IF_ERROR(parse_positive(v));
  return {};
}

TEST(Result, CarriesValueOrError) {
  EXPECT_EQ(*doubled(21), 42);
  Result<int> bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::kInvalidInput);
  EXPECT_EQ(bad.error().message, "value -1 is not positive");
  EXPECT_TRUE(check(3).ok());
  EXPECT_EQ(check(0).error().code, Errc::kInvalidInput);
}

TEST(Result, ContextPrefixesWhere) {
  Error e = io_error("disk full").context("writing log.bin");
  EXPECT_EQ(e.message, "writing log.bin: disk full");
  EXPECT_EQ(exit_code(e.code), 3);
  EXPECT_EQ(exit_code(Errc::kRejected), 1);
}

}  // namespace
}  // namespace vt
