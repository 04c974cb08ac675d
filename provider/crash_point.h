#pragma once
// Crash injection for the resume tests: with VT_CRASH_AT=<point>:<epoch> in the environment the
// provider kills itself with SIGKILL when it reaches that point in that epoch, exactly as a
// power cut or the OOM killer would. Points: during_training, before_snapshot_write,
// after_snapshot_write, after_log_append. Unset (always, outside tests), it costs one branch.
// In a run of several ranks only rank $VT_CRASH_RANK (default 0) dies; followers reach
// during_training too. VT_CRASH_SIGNAL=STOP freezes it instead (SIGSTOP): a hung rank.

#include <cstdint>
#include <string_view>

namespace vt::provider {

void crash_point(std::string_view point, std::uint64_t epoch);

}  // namespace vt::provider
