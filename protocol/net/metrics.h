#pragma once
// Server counters and the Prometheus listener for `--metrics HOST:PORT`. The counters are
// plain atomics, updated from the server's I/O threads and read by the HTTP listener.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/result.h"
#include "protocol/net/frame.h"

namespace vt {

class Metrics {
 public:
  void count_request(wire::MessageType type);
  void count_error(std::string_view code);
  void add_bytes_sent(std::uint64_t n) { bytes_sent_.fetch_add(n, std::memory_order_relaxed); }
  void connection_opened() {
    connections_.fetch_add(1, std::memory_order_relaxed);
    active_.fetch_add(1, std::memory_order_relaxed);
  }
  void connection_closed() { active_.fetch_sub(1, std::memory_order_relaxed); }
  void count_resume() { resumes_.fetch_add(1, std::memory_order_relaxed); }
  // The listener paused because the process was out of file descriptors (or memory).
  void count_accept_pause() { accept_pauses_.fetch_add(1, std::memory_order_relaxed); }
  // Epochs with a durable commitment (the number of log records).
  void set_epochs_committed(std::uint64_t n);

  std::uint64_t requests(wire::MessageType type) const;
  std::uint64_t errors(std::string_view code) const;
  std::uint64_t errors_total() const;
  std::uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }
  std::int64_t active_connections() const { return active_.load(std::memory_order_relaxed); }
  std::uint64_t connections_total() const { return connections_.load(std::memory_order_relaxed); }
  std::uint64_t resumes() const { return resumes_.load(std::memory_order_relaxed); }
  std::uint64_t accept_pauses() const { return accept_pauses_.load(std::memory_order_relaxed); }
  std::uint64_t epochs_committed() const { return epochs_.load(std::memory_order_relaxed); }

  // Prometheus text exposition format 0.0.4.
  std::string prometheus_text() const;

  // Error codes the server sends (docs/protocol.md); any other code counts as "other".
  static constexpr std::string_view kErrorCodes[] = {
      "bad_frame",   "unsupported_version", "frame_too_large", "unauthorized",
      "bad_request", "not_found",           "unusable_state",  "busy",
      "timeout",     "resume_mismatch",     "internal",        "other"};

 private:
  std::atomic<std::uint64_t> requests_[wire::kMaxMessageType + 1] = {};
  std::atomic<std::uint64_t> errors_[std::size(kErrorCodes)] = {};
  std::atomic<std::uint64_t> bytes_sent_{0};
  std::atomic<std::uint64_t> accept_pauses_{0};
  std::atomic<std::int64_t> active_{0};
  std::atomic<std::uint64_t> connections_{0};
  std::atomic<std::uint64_t> resumes_{0};
  std::atomic<std::uint64_t> epochs_{0};
};

// GET /metrics over plain HTTP/1.1 (Boost.Beast) on its own thread, and GET /healthz ("ok":
// the process is up and answering, for a liveness probe). Anything else gets 404.
class MetricsServer {
 public:
  // port 0 picks a free port; port() tells which.
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& host, std::uint16_t port,
                                                      std::shared_ptr<const Metrics> metrics);
  // The body of /metrics from `render` (called on the listener's thread for each scrape): the
  // server's counters and whatever else the process exports, such as training progress.
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& host, std::uint16_t port,
                                                      std::function<std::string()> render);
  ~MetricsServer();  // stops
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  std::uint16_t port() const;
  void stop();

  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vt
