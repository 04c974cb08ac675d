#include "common/activity.h"

#include <unistd.h>

#include <cstdlib>
#include <new>
#include <vector>

namespace vt {
namespace {

// Scopes only push and pop. An exception that unwinds a scope leaves its text in `unwound`
// (innermost first) for the edge that catches it; both vectors have their room reserved when a
// scope is entered, so a thread out of memory needs none to keep them.
struct Activities {
  std::vector<std::string> stack;
  std::vector<std::string> unwound;
};
thread_local Activities* activities = nullptr;

const char* program_name = "veritrain";

[[noreturn]] void on_terminate() {
  const Error e = error_from_exception(std::current_exception());
  const std::string line = std::string(program_name) + ": error: " + e.message + "\n";
  // write(2), not iostreams: the process may be out of memory, and other threads may be mid-way
  // through their own output.
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
  std::_Exit(exit_code(e.code));
}

}  // namespace

Activity::Activity(std::string what) : exceptions_(std::uncaught_exceptions()) {
  if (activities == nullptr) activities = new Activities();
  activities->unwound.clear();  // new work: what an earlier, handled exception unwound is past
  activities->stack.push_back(std::move(what));
  activities->unwound.reserve(activities->stack.size());
}

Activity::~Activity() {
  if (activities == nullptr || activities->stack.empty()) return;
  if (std::uncaught_exceptions() > exceptions_)
    activities->unwound.push_back(std::move(activities->stack.back()));
  activities->stack.pop_back();
}

std::string Activity::current() {
  std::string out;
  if (activities == nullptr) return out;
  auto add = [&](const std::string& what) {
    if (!out.empty()) out += ", within ";
    out += what;
  };
  for (const std::string& what : activities->unwound) add(what);
  for (auto it = activities->stack.rbegin(); it != activities->stack.rend(); ++it) add(*it);
  return out;
}

Error error_from_exception(const std::exception_ptr& e) {
  const std::string during = Activity::current();
  const std::string at = during.empty() ? std::string() : " while " + during;
  if (!e) return internal_error("std::terminate called without an exception" + at + " (a bug)");
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    return io_error("out of memory" + at +
                    ": this machine's memory (or the process's address-space limit) is below "
                    "what the work needs; every size a peer sends is bounded before it is "
                    "allocated (docs/reliability.md)");
  } catch (const std::exception& ex) {
    return internal_error(std::string("unexpected exception") + at + ": " + ex.what() + " (a bug)");
  } catch (...) {
    return internal_error("unexpected exception of unknown type" + at + " (a bug)");
  }
}

void handle_uncaught_exceptions(const char* program) {
  program_name = program;
  std::set_terminate(on_terminate);
}

}  // namespace vt
