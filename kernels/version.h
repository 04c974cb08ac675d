#pragma once
// The edition of docs/portable.md's arithmetic these kernels implement (a task's
// portable_arithmetic). Any change that moves a portable bit, in any kernel, for any input, is a
// new version: tests/cli/portable_roots_test.cpp holds the roots version 1 commits.

#include <cstdint>

namespace vt::kernels {

inline constexpr std::int64_t kPortableArithmetic = 1;

}  // namespace vt::kernels
