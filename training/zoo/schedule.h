#pragma once
// Learning-rate schedules. The rate feeds every weight update, so it must be the same double on
// every machine: only IEEE basic operations here (no libm pow or cos, whose last bit may differ
// between C libraries).

#include <cstdint>

#include "protocol/task.h"

namespace vt::training {

// The rate for the optimizer step `global_step` (0-based) taken in `epoch` (1-based), in a task
// of `total_steps` steps.
double learning_rate(const Task& task, std::int64_t global_step, std::int64_t epoch,
                     std::int64_t total_steps);

// x^n by repeated squaring: exact operation order, so the same bits everywhere.
double power(double x, std::int64_t n);
// cos(x) for x in [0, pi] from its Taylor series around pi/2 (within 2 ulp of libm).
double deterministic_cos(double x);

}  // namespace vt::training
