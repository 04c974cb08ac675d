// Hostile bytes and files at the common/ edge: JSON nested to blow the stack, a FIFO where a
// file belongs, a sparse file that declares more than any task needs, secrets left readable, and
// the temp files of a killed write.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/file_io.h"
#include "common/json.h"
#include "common/mapped_file.h"
#include "common/safetensors.h"
#include "tests/test_util.h"

namespace vt {
namespace {

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(BoundedJson, DepthIsCountedOutsideStringsOnly) {
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,{"b":[]}]})"), 4u);
  EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[{{{{\"[["})"), 1u);
  // Stray closers do not drive the count below zero (which would hide the depth after them).
  EXPECT_EQ(json_nesting_depth("[]]]]][[]"), 2u);
  EXPECT_EQ(json_nesting_depth(nested(100000), 64), 65u);
}

TEST(BoundedJson, HundredThousandDeepIsRefusedBeforeParsing) {
  auto deep = parse_json(nested(100000), "record");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error().message, "record: JSON nested deeper than 64 levels");
  EXPECT_TRUE(parse_json(nested(64), "edge").ok());
  EXPECT_FALSE(parse_json(nested(65), "edge").ok());
  auto broken = parse_json("{\"a\":", "x");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message.find("x: not valid JSON"), std::string::npos);
}

TEST(BoundedJson, SafetensorsHeaderNestedDeepIsRefused) {
  const std::string header = "{\"__metadata__\":{\"a\":" + nested(100000) + "}}";
  Bytes file(8);
  put_u64le(file.data(), header.size());
  file.insert(file.end(), header.begin(), header.end());
  auto parsed = parse_safetensors(file, Canonical::kAllowAny);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("nested deeper than 64"), std::string::npos)
      << parsed.error().message;
}

TEST(HostileFiles, FifoIsRefusedWithoutBlocking) {
  testing::ScratchDir dir;
  const auto fifo = dir / "task.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto r = read_text_file(fifo);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kInvalidInput);
  EXPECT_NE(r.error().message.find("is not a regular file"), std::string::npos)
      << r.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

// A dataset shard is memory-mapped, not read: its open must not block on a FIFO either.
TEST(HostileFiles, FifoAsAMappedDataFileIsRefusedWithoutBlocking) {
  testing::ScratchDir dir;
  const auto fifo = dir / "shard.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto r = MappedFile::open(fifo);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kInvalidInput);
  EXPECT_NE(r.error().message.find("not a regular file"), std::string::npos) << r.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(HostileFiles, SixtyFourGibSparseFileIsRefusedBeforeAllocating) {
  testing::ScratchDir dir;
  const auto sparse = dir / "snapshot.vtc";
  int fd = ::open(sparse.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, std::int64_t{64} << 30), 0);
  ::close(fd);
  auto r = read_file(sparse, std::uint64_t{16} << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            sparse.string() + " is 68719476736 bytes, more than the limit of 16777216");
}

TEST(HostileFiles, SecretOpenToOthersIsRefusedWithTheChmodThatFixesIt) {
  testing::ScratchDir dir;
  const auto token = dir / "serve.token";
  ASSERT_TRUE(
      write_file_atomic(token, std::string_view("0123456789abcdef0123456789abcdef\n"), 0600).ok());
  ASSERT_TRUE(read_secret_file(token).ok());
  ASSERT_EQ(::chmod(token.c_str(), 0644), 0);
  auto r = read_secret_file(token);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, token.string() +
                                   " holds a secret but is open to group or others (mode 0644); "
                                   "make it private with: chmod 600 " +
                                   token.string());
  EXPECT_FALSE(check_secret_file(token).ok());
  ASSERT_EQ(::chmod(token.c_str(), 0400), 0);
  EXPECT_TRUE(check_secret_file(token).ok());
}

TEST(HostileFiles, SweepRemovesTempFilesOfDeadWritersOnly) {
  testing::ScratchDir dir;
  // A pid that has exited: a child that ends at once.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  int status = 0;
  ::waitpid(dead, &status, 0);
  const auto killed = dir / ("abc.vtc.tmp." + std::to_string(dead) + ".3");
  const auto live = dir / ("def.vtc.tmp." + std::to_string(::getppid()) + ".0");
  const auto mine = dir / ("ghi.vtc.tmp." + std::to_string(::getpid()) + ".1");
  const auto unrelated = dir / "notes.tmp.txt";
  for (const auto& p : {killed, live, mine, unrelated})
    ASSERT_TRUE(write_file_atomic(p, std::string_view("x")).ok());
  EXPECT_EQ(sweep_temp_files(dir.path()), 1u);
  EXPECT_FALSE(std::filesystem::exists(killed));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_TRUE(std::filesystem::exists(mine));
  EXPECT_TRUE(std::filesystem::exists(unrelated));
}

}  // namespace
}  // namespace vt
