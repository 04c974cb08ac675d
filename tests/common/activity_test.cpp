// What a process says when it cannot go on (common/activity.h): the activity an exception
// unwound, an exit code for whose fault it was, and no SIGABRT from any thread.
#include "common/activity.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <new>
#include <thread>

#include "common/file_io.h"
#include "tests/test_util.h"

namespace vt {
namespace {

void read_the_log() {
  const Activity reading("reading the commitment log from provider h:1");
  throw std::bad_alloc();
}

TEST(Activity, TheEdgeNamesWhatAnExceptionUnwound) {
  const Activity verifying("verifying task t");
  try {
    read_the_log();
  } catch (...) {
    const Error e = error_from_exception(std::current_exception());
    EXPECT_EQ(e.code, Errc::kIo);
    EXPECT_NE(e.message.find("out of memory while reading the commitment log from provider h:1, "
                             "within verifying task t"),
              std::string::npos)
        << e.message;
  }
  // New work forgets what an exception it survived unwound.
  const Activity next("writing the report");
  EXPECT_EQ(Activity::current(), "writing the report, within verifying task t");
}

TEST(Activity, OtherExceptionsAreInternal) {
  try {
    throw std::runtime_error("boom");
  } catch (...) {
    const Error e = error_from_exception(std::current_exception());
    EXPECT_EQ(e.code, Errc::kInternal);
    EXPECT_NE(e.message.find("unexpected exception: boom (a bug)"), std::string::npos) << e.message;
  }
}

// An exception that escapes a thread ends the process with the message and exit 3, not abort().
TEST(Activity, AnExceptionEscapingAThreadEndsTheProcessWithItsExitCode) {
  testing::ScratchDir dir;
  const auto err = dir / "stderr";
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen(err.c_str(), "w", stderr);
    handle_uncaught_exceptions("probe");
    std::thread([] { read_the_log(); }).join();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 3);
  const std::string said = *read_text_file(err);
  EXPECT_NE(said.find("probe: error: out of memory while reading the commitment log from "
                      "provider h:1"),
            std::string::npos)
      << said;
}

}  // namespace
}  // namespace vt
