#include "cli/progress.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "common/bytes.h"

namespace vt::cli {
namespace {
constexpr auto kJsonInterval = std::chrono::seconds(1);
}

Progress::Progress(bool json, std::int64_t total_epochs)
    : bar_(!json && ::isatty(STDERR_FILENO) == 1), json_(json), total_epochs_(total_epochs) {}

void Progress::step(const training::StepMetrics& m) {
  const double eta = m.step_in_epoch > 0
                         ? m.seconds / static_cast<double>(m.step_in_epoch) *
                               static_cast<double>(m.steps_in_epoch - m.step_in_epoch)
                         : 0.0;
  if (bar_) {
    constexpr int kWidth = 30;
    const int filled =
        static_cast<int>(kWidth * m.step_in_epoch / std::max<std::int64_t>(1, m.steps_in_epoch));
    std::fprintf(
        stderr,
        "\r\033[Kepoch %lld/%lld [%s%s] %lld/%lld steps  loss %.4f  %.0f samples/s  ETA %.0fs",
        static_cast<long long>(m.epoch), static_cast<long long>(total_epochs_),
        std::string(static_cast<std::size_t>(filled), '#').c_str(),
        std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(),
        static_cast<long long>(m.step_in_epoch), static_cast<long long>(m.steps_in_epoch), m.loss,
        m.samples_per_second, eta);
    std::fflush(stderr);
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (json_ && now - last_line_ >= kJsonInterval) {
    last_line_ = now;
    std::cout << nlohmann::json{{"message_type", "status"},
                                {"kind", "train status"},
                                {"ok", true},
                                {"epoch", m.epoch},
                                {"epochs", total_epochs_},
                                {"step", m.step_in_epoch},
                                {"steps", m.steps_in_epoch},
                                {"loss", m.loss},
                                {"samples_per_second", m.samples_per_second},
                                {"eta_seconds", eta}}
                     .dump()
              << std::endl;
  }
}

void Progress::committed(const provider::CommitEvent& e) {
  const std::string root = hex_encode(e.root);
  if (bar_) {
    std::fprintf(
        stderr, "\r\033[Kepoch %llu committed  root %s  loss %.4f  stored %.2f of %.2f MiB%s\n",
        static_cast<unsigned long long>(e.epoch), root.substr(0, 16).c_str(), e.loss,
        static_cast<double>(e.stored_bytes) / 1048576.0,
        static_cast<double>(e.raw_bytes) / 1048576.0, e.resumed_file ? " (already on disk)" : "");
    return;
  }
  if (!json_) {  // stdout keeps the human summary alone; a line per commitment goes to the log
    std::fprintf(stderr, "epoch %llu committed  root %s  loss %.4f  stored %.2f of %.2f MiB%s\n",
                 static_cast<unsigned long long>(e.epoch), root.substr(0, 16).c_str(), e.loss,
                 static_cast<double>(e.stored_bytes) / 1048576.0,
                 static_cast<double>(e.raw_bytes) / 1048576.0,
                 e.resumed_file ? " (already on disk)" : "");
    return;
  }
  std::cout << nlohmann::json{{"message_type", "commit"},
                              {"kind", "train commit"},
                              {"ok", true},
                              {"epoch", e.epoch},
                              {"root", root},
                              {"loss", e.loss},
                              {"stored_bytes", e.stored_bytes},
                              {"raw_bytes", e.raw_bytes}}
                   .dump()
            << std::endl;
}

void Progress::notice(const std::string& text) {
  if (bar_) std::fprintf(stderr, "\r\033[K");
  spdlog::info("{}", text);
}

}  // namespace vt::cli
