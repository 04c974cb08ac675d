// libFuzzer target for the task parser (protocol/task.h): any text parses to a valid task or is
// refused with an error naming the field. A parsed task survives its own canonical JSON: it
// parses again to the same task_id, and validate_task accepts it.

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/task.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto task = vt::parse_task(text, "fuzz");
  if (!task.ok()) return 0;
  if (!vt::validate_task(*task, "fuzz").ok()) std::abort();
  const std::string canonical = vt::canonical_task_json(*task);
  auto again = vt::parse_task(canonical, "fuzz canonical");
  if (!again.ok() || vt::task_id(*again) != vt::task_id(*task)) std::abort();
  auto pretty = vt::parse_task(vt::pretty_task_json(*task), "fuzz pretty");
  if (!pretty.ok() || vt::task_id(*pretty) != vt::task_id(*task)) std::abort();
  return 0;
}
