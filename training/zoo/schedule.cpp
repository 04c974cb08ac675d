#include "training/zoo/schedule.h"

namespace vt::training {

double power(double x, std::int64_t n) {
  double result = 1.0;
  while (n > 0) {
    if (n & 1) result *= x;
    x *= x;
    n >>= 1;
  }
  return result;
}

double deterministic_cos(double x) {
  // cos(x) = -sin(x - pi/2); |x - pi/2| <= pi/2, where 25 odd terms converge far past 1e-16.
  constexpr double kHalfPi = 1.57079632679489661923;
  const double y = x - kHalfPi;
  const double y2 = y * y;
  double term = y;
  double sum = y;
  for (int k = 1; k < 25; ++k) {
    term *= -y2 / static_cast<double>((2 * k) * (2 * k + 1));
    sum += term;
  }
  const double c = -sum;
  return c > 1.0 ? 1.0 : (c < -1.0 ? -1.0 : c);  // the series may overshoot by an ulp at the ends
}

double learning_rate(const Task& task, std::int64_t global_step, std::int64_t epoch,
                     std::int64_t total_steps) {
  constexpr double kPi = 3.14159265358979323846;
  const ScheduleSpec& s = task.schedule;
  const double base = task.optimizer.lr;
  double lr = base;
  if (s.name == "step") {
    lr = base * power(s.gamma, (epoch - 1) / s.step_size);
  } else if (s.name == "cosine") {
    const std::int64_t span = total_steps > 1 ? total_steps - 1 : 1;
    const double t =
        static_cast<double>(global_step < span ? global_step : span) / static_cast<double>(span);
    lr = s.min_lr + (base - s.min_lr) * 0.5 * (1.0 + deterministic_cos(kPi * t));
  }
  if (global_step < s.warmup_steps) {
    lr *= static_cast<double>(global_step + 1) / static_cast<double>(s.warmup_steps);
  }
  return lr;
}

}  // namespace vt::training
