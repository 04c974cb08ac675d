#include "provider/crash_point.h"

#include <csignal>
#include <cstdlib>
#include <string>

namespace vt::provider {

void crash_point(std::string_view point, std::uint64_t epoch) {
  static const std::string target = [] {
    const char* v = std::getenv("VT_CRASH_AT");
    return std::string(v == nullptr ? "" : v);
  }();
  if (target.empty()) return;
  // With several ranks (provider/ranks.h) every rank inherits the variable; VT_CRASH_RANK picks
  // the one that dies (rank 0 when unset).
  static const bool this_rank = [] {
    const char* want = std::getenv("VT_CRASH_RANK");
    const char* rank = std::getenv("RANK");
    return std::string(want ? want : "0") == std::string(rank ? rank : "0");
  }();
  if (!this_rank) return;
  // VT_CRASH_SIGNAL=STOP freezes the process instead: a rank that hangs rather than dies.
  static const bool stop = [] {
    const char* v = std::getenv("VT_CRASH_SIGNAL");
    return v != nullptr && std::string(v) == "STOP";
  }();
  if (target == std::string(point) + ":" + std::to_string(epoch))
    std::raise(stop ? SIGSTOP : SIGKILL);
}

}  // namespace vt::provider
