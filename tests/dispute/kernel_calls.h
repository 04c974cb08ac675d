#pragma once
// Kernel calls that exercise every recorded operator of docs/dispute.md (and every shape of
// operand a trace knows), for the dispute tests to record, recompute and rule on.

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace vt::testing {

// n values of a sine ramp: distinct, signed, none zero but by chance.
std::vector<float> ramp(std::size_t n, float scale, float offset = 0.0f);
// As many values as a tensor of this shape holds.
std::vector<float> ramp(std::initializer_list<std::size_t> shape, float scale, float offset = 0.0f);

// Calls every recorded operator at least once, in a fixed order (tests/dispute/dispute_test.cpp
// lists it).
void run_kernels();

}  // namespace vt::testing
