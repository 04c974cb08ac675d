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

namespace {

// What an epoch's commitment says, in words: epoch 0 is the initial state (no training, no
// loss); later epochs their mean training loss and, with an eval split, the held-out metrics.
std::string commit_line(const provider::CommitEvent& e) {
  char text[320];
  const std::string root = hex_encode(e.root).substr(0, 16);
  int n = std::snprintf(text, sizeof text, "epoch %llu committed  root %s  ",
                        static_cast<unsigned long long>(e.epoch), root.c_str());
  std::string line(text, static_cast<std::size_t>(n));
  if (e.epoch == 0) {
    line += "initial state";
  } else {
    std::snprintf(text, sizeof text, "loss %.4f", e.loss);
    line += text;
  }
  if (e.eval) {
    std::snprintf(text, sizeof text, "  held-out loss %.4f", e.eval->loss);
    line += text;
    if (e.eval->accuracy) {
      std::snprintf(text, sizeof text, " accuracy %.2f%%", *e.eval->accuracy * 100.0);
      line += text;
    }
  }
  std::snprintf(text, sizeof text, "  stored %.2f of %.2f MiB%s",
                static_cast<double>(e.stored_bytes) / 1048576.0,
                static_cast<double>(e.raw_bytes) / 1048576.0,
                e.resumed_file ? " (already on disk)" : "");
  return line + text;
}

}  // namespace

void Progress::committed(const provider::CommitEvent& e) {
  if (bar_) {
    std::fprintf(stderr, "\r\033[K%s\n", commit_line(e).c_str());
    return;
  }
  if (!json_) {  // stdout keeps the human summary alone; a line per commitment goes to the log
    std::fprintf(stderr, "%s\n", commit_line(e).c_str());
    return;
  }
  nlohmann::json eval = nullptr;
  if (e.eval) {
    eval = {{"loss", e.eval->loss},
            {"accuracy", e.eval->accuracy ? nlohmann::json(*e.eval->accuracy) : nullptr},
            {"examples", e.eval->examples}};
  }
  std::cout << nlohmann::json{{"message_type", "commit"},
                              {"kind", "train commit"},
                              {"ok", true},
                              {"epoch", e.epoch},
                              {"root", hex_encode(e.root)},
                              // Epoch 0 trained nothing: it has no loss.
                              {"loss",
                               e.epoch == 0 ? nlohmann::json(nullptr) : nlohmann::json(e.loss)},
                              {"eval", eval},
                              {"stored_bytes", e.stored_bytes},
                              {"raw_bytes", e.raw_bytes},
                              {"train_seconds", e.train_seconds},
                              {"commit_wait_seconds", provider::training_waited(e)},
                              {"commit_mode", e.streamed ? "stream" : "overlap"}}
                   .dump()
            << std::endl;
}

void Progress::notice(const std::string& text) {
  if (bar_) std::fprintf(stderr, "\r\033[K");
  spdlog::info("{}", text);
}

}  // namespace vt::cli
