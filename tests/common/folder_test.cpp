#include "common/folder.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "common/file_io.h"
#include "tests/test_util.h"

namespace vt {
namespace {

namespace fs = std::filesystem;

std::string text(const Bytes& b) { return std::string(b.begin(), b.end()); }

TEST(Folder, ReadsRegularFilesBelowIt) {
  testing::ScratchDir dir;
  fs::create_directories(dir / "in" / "sub");
  ASSERT_TRUE(write_file_atomic(dir / "in" / "sub" / "a.txt", std::string_view("inside")).ok());
  auto folder = Folder::open(dir / "in");
  ASSERT_TRUE(folder.ok()) << folder.error().message;
  auto read = folder->read("sub/a.txt", 100);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(text(*read), "inside");
  EXPECT_TRUE(folder->has_file("sub/a.txt"));
  EXPECT_FALSE(folder->has_file("sub"));  // a folder, not a file
  EXPECT_FALSE(folder->has_file("absent"));
  auto big = folder->read("sub/a.txt", 3);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("is 6 bytes, more than the limit of 3"), std::string::npos)
      << big.error().message;
}

TEST(Folder, RefusesLinksAndDotDotWhereverTheyAre) {
  testing::ScratchDir dir;
  fs::create_directories(dir / "in" / "sub");
  fs::create_directories(dir / "out");
  ASSERT_TRUE(write_file_atomic(dir / "out" / "secret", std::string_view("outside")).ok());
  ASSERT_TRUE(write_file_atomic(dir / "in" / "sub" / "a.txt", std::string_view("inside")).ok());
  fs::create_symlink(dir / "out" / "secret", dir / "in" / "link");
  fs::create_symlink(dir / "in" / "sub" / "a.txt", dir / "in" / "inner");  // even inside
  fs::create_symlink(dir / "out", dir / "in" / "linked_dir");
  auto folder = Folder::open(dir / "in");
  ASSERT_TRUE(folder.ok()) << folder.error().message;
  const std::string beneath =
      "only regular files inside " + (dir / "in").string() + " are read, links are not followed";
  auto link = folder->read("link", 100);
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.error().message,
            (dir / "in" / "link").string() + ": is a symbolic link; " + beneath);
  EXPECT_FALSE(folder->read("inner", 100).ok());
  auto through = folder->read("linked_dir/secret", 100);
  ASSERT_FALSE(through.ok());
  EXPECT_EQ(through.error().message, (dir / "in" / "linked_dir" / "secret").string() +
                                         ": passes through a symbolic link; " + beneath);
  EXPECT_FALSE(folder->has_file("link"));
  for (const char* escape : {"../out/secret", "sub/../../out/secret", "/etc/hostname"}) {
    auto r = folder->read(escape, 100);
    ASSERT_FALSE(r.ok()) << escape;
    EXPECT_NE(r.error().message.find("expected a path below " + (dir / "in").string()),
              std::string::npos)
        << r.error().message;
  }
}

TEST(Folder, KeepsReadingTheFolderItOpenedAfterItsPathIsSwapped) {
  testing::ScratchDir dir;
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  ASSERT_TRUE(write_file_atomic(dir / "in" / "a.txt", std::string_view("inside")).ok());
  ASSERT_TRUE(write_file_atomic(dir / "out" / "a.txt", std::string_view("outside")).ok());
  auto folder = Folder::open(dir / "in");
  ASSERT_TRUE(folder.ok()) << folder.error().message;
  fs::rename(dir / "in", dir / "moved");
  fs::create_symlink(dir / "out", dir / "in");
  auto read = folder->read("a.txt", 100);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(text(*read), "inside");
}

TEST(Folder, AFifoIsRefusedAtOnce) {
  testing::ScratchDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  auto folder = Folder::open(dir.path());
  ASSERT_TRUE(folder.ok());
  auto read = folder->read("fifo", 100);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().message.find("is not a regular file"), std::string::npos)
      << read.error().message;
}

}  // namespace
}  // namespace vt
