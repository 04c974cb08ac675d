#pragma once
// Training progress as Prometheus gauges, for `train --metrics HOST:PORT`: a dashboard (or a
// requestor with access) sees epoch, step, loss, throughput and how far commitments trail
// training, not only the serving counters. Updated from the training thread, read by the
// metrics listener's thread: atomics, no lock.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace vt::cli {

class TrainMetrics {
 public:
  explicit TrainMetrics(std::int64_t total_epochs) : epochs_(total_epochs) {}
  void step(std::int64_t epoch, std::int64_t step, std::int64_t steps, double loss,
            double samples_per_second);
  // Epoch `epoch`'s commitment is durable; the lag is measured from its last step.
  void committed(std::uint64_t epoch);
  std::string prometheus_text() const;

 private:
  const std::int64_t epochs_;
  std::atomic<std::int64_t> epoch_{0}, step_{0}, steps_{0};
  std::atomic<std::uint64_t> committed_{0};
  std::atomic<double> loss_{0.0}, samples_per_second_{0.0}, commit_lag_{0.0};
  std::mutex mutex_;  // epoch_end_, touched by the training thread only, around each epoch
  std::map<std::int64_t, std::chrono::steady_clock::time_point> epoch_end_;
};

}  // namespace vt::cli
