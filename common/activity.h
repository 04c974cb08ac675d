#pragma once
// What this thread is doing, for the one message a process prints when it cannot go on: out of
// memory, or an exception no module turned into an error ("out of memory while reading the
// commitment log from provider 127.0.0.1:7443"). Scopes nest; the innermost is named first.
//
// handle_uncaught_exceptions() makes that message the end of any thread's uncaught exception,
// with an exit code for whose fault it was (docs/cli.md): 3 for memory this machine lacks, 4 for
// anything else (a bug). No exception ends a veritrain process in std::abort.

#include <exception>
#include <string>

#include "common/result.h"

namespace vt {

class Activity {
 public:
  // `what` reads after "while": "reading the commitment log from provider h:p".
  explicit Activity(std::string what);
  ~Activity();
  Activity(const Activity&) = delete;
  Activity& operator=(const Activity&) = delete;

  // This thread's activities, innermost first, joined by ", within "; "" when none. Scopes an
  // exception in flight has left since the last scope began are still named: the edge that
  // catches it asks after they are gone.
  static std::string current();

 private:
  int exceptions_;  // std::uncaught_exceptions() on entry: more on exit means unwinding
};

// The error an exception that reached a command's edge stands for: std::bad_alloc is this
// machine's want of memory (Errc::kIo, exit 3), naming what the thread was doing; anything else
// is internal (exit 4).
Error error_from_exception(const std::exception_ptr& e);

// Installs a std::terminate handler that prints error_from_exception's message (prefixed by
// `program`) and exits with its code, so that an exception escaping any thread ends the process
// with a message and an exit code instead of SIGABRT.
void handle_uncaught_exceptions(const char* program);

}  // namespace vt
