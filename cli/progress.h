#pragma once
// Training progress for people and machines (restic style): with --json, one JSON status line
// on stdout per interval and one at every commitment, and the caller prints a final summary
// line; otherwise a bar per epoch on stderr when it is a terminal, else a line per commitment
// there. stdout carries one kind of text: JSON lines, or the human summary.

#include <chrono>
#include <string>

#include "provider/provider.h"

namespace vt::cli {

class Progress {
 public:
  Progress(bool json, std::int64_t total_epochs);
  void step(const training::StepMetrics& m);
  void committed(const provider::CommitEvent& e);
  void notice(const std::string& text);

 private:
  bool bar_;  // a terminal on stderr and not --json
  bool json_;
  std::int64_t total_epochs_;
  std::chrono::steady_clock::time_point last_line_{};
};

}  // namespace vt::cli
