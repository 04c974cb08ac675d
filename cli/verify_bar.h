#pragma once
// `verify`'s progress for people: one bar over the challenged epochs with an ETA, redrawn on
// stderr, only when stderr is a terminal (on a pipe or in a log file the event lines say it all).
// Event lines print above the bar. Header-only: cmd_verify.cpp is its one user.

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include "verifier/check/verify.h"

namespace vt::cli {

class VerifyBar {
 public:
  VerifyBar() : on_(::isatty(STDERR_FILENO) == 1) {}
  VerifyBar(const VerifyBar&) = delete;
  VerifyBar& operator=(const VerifyBar&) = delete;
  ~VerifyBar() { finish(); }

  // Clears the bar, so that the verdict printed next starts on a clean line.
  void finish() {
    std::lock_guard lock(mutex_);
    if (on_ && drawn_) std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    drawn_ = false;
  }

  bool on() const { return on_; }

  // An event line (spdlog), printed above the bar.
  void event(const std::string& line) {
    std::lock_guard lock(mutex_);
    if (on_ && drawn_) std::fputs("\r\033[K", stderr);
    spdlog::info("verify: {}", line);
    if (on_ && drawn_) draw();
  }

  void update(const verifier::VerifyProgress& p) {
    std::lock_guard lock(mutex_);
    if (!on_) return;
    if (!started_) {
      started_ = true;
      start_ = std::chrono::steady_clock::now();
    }
    last_ = p;
    draw();
  }

 private:
  void draw() {
    constexpr int kWidth = 30;
    const std::size_t total = std::max<std::size_t>(last_.challenged, 1);
    const int filled = static_cast<int>(kWidth * std::min(last_.judged, total) / total);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::string eta = "ETA --";
    if (last_.judged > 0 && last_.final) {
      const double left = elapsed / static_cast<double>(last_.judged) *
                          static_cast<double>(total - std::min(last_.judged, total));
      char buf[32];
      std::snprintf(buf, sizeof buf, "ETA %d:%02d", static_cast<int>(left) / 60,
                    static_cast<int>(left) % 60);
      eta = buf;
    }
    std::fprintf(stderr, "\r\033[Kverify [%s%s] %zu/%zu%s challenged epochs judged  %s",
                 std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), last_.judged,
                 last_.challenged, last_.final ? "" : "+", eta.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

  bool on_;
  bool drawn_ = false;
  bool started_ = false;
  std::chrono::steady_clock::time_point start_;
  verifier::VerifyProgress last_;
  std::mutex mutex_;
};

}  // namespace vt::cli
