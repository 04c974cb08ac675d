#include "cli/train_metrics.h"

#include <sstream>

namespace vt::cli {

void TrainMetrics::step(std::int64_t epoch, std::int64_t step, std::int64_t steps, double loss,
                        double samples_per_second) {
  epoch_.store(epoch, std::memory_order_relaxed);
  step_.store(step, std::memory_order_relaxed);
  steps_.store(steps, std::memory_order_relaxed);
  loss_.store(loss, std::memory_order_relaxed);
  samples_per_second_.store(samples_per_second, std::memory_order_relaxed);
  if (step == steps) {
    std::lock_guard lock(mutex_);
    epoch_end_[epoch] = std::chrono::steady_clock::now();
  }
}

void TrainMetrics::committed(std::uint64_t epoch) {
  committed_.store(epoch + 1, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  const auto end = epoch_end_.find(static_cast<std::int64_t>(epoch));
  if (end == epoch_end_.end()) return;  // epoch 0 (the initial state) or resumed from disk
  commit_lag_.store(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - end->second).count(),
      std::memory_order_relaxed);
  epoch_end_.erase(epoch_end_.begin(), std::next(end));
}

std::string TrainMetrics::prometheus_text() const {
  std::ostringstream out;
  auto gauge = [&out](const char* name, const char* help, auto value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n"
        << name << " " << value << "\n";
  };
  gauge("veritrain_train_epoch", "Epoch being trained (1-based).",
        epoch_.load(std::memory_order_relaxed));
  gauge("veritrain_train_epochs", "Epochs the task trains.", epochs_);
  gauge("veritrain_train_step", "Steps done in the current epoch.",
        step_.load(std::memory_order_relaxed));
  gauge("veritrain_train_steps_per_epoch", "Steps in the current epoch.",
        steps_.load(std::memory_order_relaxed));
  gauge("veritrain_train_loss", "Loss of the latest step.", loss_.load(std::memory_order_relaxed));
  gauge("veritrain_train_samples_per_second", "Training throughput over the current epoch.",
        samples_per_second_.load(std::memory_order_relaxed));
  gauge("veritrain_train_epochs_committed", "Epochs with a durable commitment, epoch 0 included.",
        committed_.load(std::memory_order_relaxed));
  gauge("veritrain_train_commit_lag_seconds",
        "Seconds from an epoch's last step to its durable commitment (latest).",
        commit_lag_.load(std::memory_order_relaxed));
  return out.str();
}

}  // namespace vt::cli
