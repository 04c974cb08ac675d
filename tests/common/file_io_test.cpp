#include "common/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/test_util.h"

namespace vt {
namespace {

TEST(FileIo, AtomicWriteReplacesAndLeavesNoTemp) {
  testing::ScratchDir dir;
  auto p = dir / "a.bin";
  ASSERT_TRUE(write_file_atomic(p, std::string_view("one")).ok());
  ASSERT_TRUE(write_file_atomic(p, std::string_view("second")).ok());
  EXPECT_EQ(*read_text_file(p), "second");
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(FileIo, RefuseOverwriteKeepsOriginal) {
  testing::ScratchDir dir;
  auto p = dir / "key.pem";
  ASSERT_TRUE(write_file_atomic(p, std::string_view("secret"), 0600, Overwrite::kRefuse).ok());
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = write_file_atomic(p, std::string_view("other"), 0600, Overwrite::kRefuse);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("already exists"), std::string::npos);
  EXPECT_EQ(*read_text_file(p), "secret");
}

TEST(FileIo, ReadRespectsLimitAndNamesFile) {
  testing::ScratchDir dir;
  auto p = dir / "big";
  ASSERT_TRUE(write_file_atomic(p, std::string(100, 'x')).ok());
  auto r = read_file(p, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(p.string()), std::string::npos);
  auto missing = read_file(dir / "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::kIo);
}

TEST(FileIo, AppendDurableAppends) {
  testing::ScratchDir dir;
  auto p = dir / "log";
  ASSERT_TRUE(append_durable(p, as_bytes("ab")).ok());
  ASSERT_TRUE(append_durable(p, as_bytes("cd")).ok());
  EXPECT_EQ(*read_text_file(p), "abcd");
}

TEST(FileIo, ReadOnlyFolderGivesClearError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores folder permissions";
  testing::ScratchDir dir;
  std::filesystem::permissions(
      dir.path(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  auto s = write_file_atomic(dir / "x", std::string_view("data"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::kIo);
}

}  // namespace
}  // namespace vt
