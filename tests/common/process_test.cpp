#include "common/process.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

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

}  // namespace
}  // namespace vt
