#include "common/process.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/file_io.h"

namespace vt {
namespace {

namespace fs = std::filesystem;

// The channel the replay workers of `verify --jobs` talk over: /bin/cat answers each line with
// itself, so lines in order, a line split across reads, and the end of the child are all seen.
TEST(ChildProcess, TalkingChildAnswersLineByLineUntilItsInputEnds) {
  const fs::path log =
      fs::temp_directory_path() / ("vt-process-test-" + std::to_string(::getpid()) + ".log");
  auto child = ChildProcess::spawn_talking({"/bin/cat"}, log);
  ASSERT_TRUE(child.ok()) << child.error().message;
  ASSERT_TRUE(child->write_line("{\"epoch\": 1}").ok());
  ASSERT_TRUE(child->write_line("second").ok());
  EXPECT_EQ(*child->read_line(), "{\"epoch\": 1}");
  EXPECT_EQ(*child->read_line(), "second");
  EXPECT_EQ(child->wait(), 0);  // cat exits at the end of its input
  // Waited for: the channel is closed in both directions.
  EXPECT_FALSE(child->write_line("late").ok());
  EXPECT_FALSE(child->read_line().ok());

  // A line past the bound is refused, not buffered without end.
  auto chatty = ChildProcess::spawn_talking({"/bin/cat"}, log);
  ASSERT_TRUE(chatty.ok()) << chatty.error().message;
  ASSERT_TRUE(chatty->write_line(std::string(5000, 'x')).ok());
  auto too_long = chatty->read_line(1000);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().message.find("longer than 1000"), std::string::npos)
      << too_long.error().message;
  fs::remove(log);
}

TEST(ChildProcess, AChildThatExitsWithoutAnsweringIsAnIoError) {
  const fs::path log =
      fs::temp_directory_path() / ("vt-process-test-true-" + std::to_string(::getpid()) + ".log");
  auto child = ChildProcess::spawn_talking({"/bin/true"}, log);
  ASSERT_TRUE(child.ok()) << child.error().message;
  auto line = child->read_line();
  ASSERT_FALSE(line.ok());
  EXPECT_EQ(line.error().code, Errc::kIo);
  EXPECT_NE(line.error().message.find("ended without answering"), std::string::npos)
      << line.error().message;
  // Writing to a child that is gone is an error too, not a SIGPIPE that ends this process.
  auto late = child->write_line("anyone there?");
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, Errc::kIo);
  EXPECT_EQ(child->wait(), 0);
  fs::remove(log);
}

// The second replays of a verifier run with their own environment entries on top of the
// parent's: an entry replaces the parent's of the same name, the rest pass through.
TEST(ChildProcess, ExtraEnvironmentEntriesReplaceAndAddToTheParents) {
  const fs::path log =
      fs::temp_directory_path() / ("vt-process-test-env-" + std::to_string(::getpid()) + ".log");
  ::setenv("VT_PROCESS_TEST_KEPT", "parent", 1);
  ::setenv("VT_PROCESS_TEST_REPLACED", "parent", 1);
  auto child = ChildProcess::spawn(
      {"/bin/sh", "-c",
       "echo $VT_PROCESS_TEST_KEPT $VT_PROCESS_TEST_REPLACED $VT_PROCESS_TEST_NEW"},
      log, -1, {"VT_PROCESS_TEST_REPLACED=child", "VT_PROCESS_TEST_NEW=added"});
  ASSERT_TRUE(child.ok()) << child.error().message;
  EXPECT_EQ(child->wait(), 0);
  auto said = read_text_file(log);
  ASSERT_TRUE(said.ok());
  EXPECT_EQ(*said, "parent child added\n");
  // The scrambled heap: a fresh block of a child under it, even one of a mebibyte (which glibc
  // would otherwise map straight from the kernel, as zeros), reads as the pattern.
  auto scrambled = ChildProcess::spawn(
      {"/usr/bin/python3", "-c",
       "import ctypes; c = ctypes.CDLL(None); c.malloc.restype = ctypes.c_void_p; "
       "print(ctypes.string_at(c.malloc(1 << 20) + 4096, 4).hex())"},
      log, -1, scrambled_memory_environment());
  ASSERT_TRUE(scrambled.ok()) << scrambled.error().message;
  EXPECT_EQ(scrambled->wait(), 0);
  said = read_text_file(log);
  ASSERT_TRUE(said.ok());
  EXPECT_EQ(*said, "5a5a5a5a\n");
  ::unsetenv("VT_PROCESS_TEST_KEPT");
  ::unsetenv("VT_PROCESS_TEST_REPLACED");
  fs::remove(log);
}

}  // namespace
}  // namespace vt
