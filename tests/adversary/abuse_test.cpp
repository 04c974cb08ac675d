// Hostile files and requests against the provider's store and the verifier's sources: a sparse
// 64 GiB snapshot, temp files of a killed write, readable secrets, a FIFO as task.json, one
// container shared by concurrent downloads, made-up delta bases that must not cost an encode.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/file_io.h"
#include "provider/catalog.h"
#include "provider/workdir/workdir.h"
#include "tests/adversary/support.h"

namespace vt::adversary {
namespace {

namespace fs = std::filesystem;

struct Stored : StoredRun {
  Stored() : StoredRun(31) {}
};

pid_t exited_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

TEST(Abuse, SparseSnapshotFarAboveTheTaskStateIsAFailureNotAnAbort) {
  Stored s;
  store(s);
  {
    int fd = ::open(s.snapshot(2).c_str(), O_WRONLY | O_TRUNC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, std::int64_t{64} << 30), 0);
    ::close(fd);
  }
  auto source = verifier::open_workdir_source(s.dir / "wd");
  ASSERT_TRUE(source.ok());
  // check_log derives the state size from the task and bounds the source with it.
  auto facts = verifier::check_log(**source, s.task, {}, true);
  ASSERT_TRUE(facts.ok()) << facts.error().message;
  // The state after epoch 2 is the huge one: fetched whatever the replay shows.
  verifier::CheckContext ctx{
      &s.task, task_id(s.task), {}, verifier::FetchAfter::kAlways, facts->layout};
  auto check = verifier::check_epoch(**source, ctx, facts->records[1], facts->records[2], false);
  ASSERT_TRUE(check.ok()) << check.error().message;
  ASSERT_FALSE(check->passed);
  const std::string why = joined(check->failures);
  EXPECT_NE(why.find("epoch 2: the committed snapshot is unusable"), std::string::npos) << why;
  EXPECT_NE(why.find("is 68719476736 bytes, more than the limit of"), std::string::npos) << why;
}

TEST(Abuse, SparseLogFarAboveTheTaskIsAFailureNotAnAbort) {
  Stored s;
  store(s);
  {
    int fd = ::open((s.dir / "wd" / "commitments.log").c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, std::int64_t{300} << 30), 0);
    ::close(fd);
  }
  auto source = verifier::open_workdir_source(s.dir / "wd");
  ASSERT_TRUE(source.ok());
  auto facts = verifier::check_log(**source, s.task, {}, true);
  ASSERT_TRUE(facts.ok()) << facts.error().message;
  const std::string why = joined(facts->failures);
  // 3 epochs: at most 4 records of at most 64 MiB each.
  EXPECT_NE(why.find("the commitment log is unreadable"), std::string::npos) << why;
  EXPECT_NE(why.find("is 322122547200 bytes, more than the limit of 268435456"), std::string::npos)
      << why;
}

TEST(Abuse, ResumeSweepsTempFilesOfAKilledWrite) {
  Stored s;
  store(s);
  const pid_t dead = exited_pid();
  const fs::path killed =
      s.dir / "wd" / "snapshots" / ("abcd.vtc.tmp." + std::to_string(dead) + ".0");
  const fs::path killed_log = s.dir / "wd" / ("commitments.log.tmp." + std::to_string(dead) + ".7");
  ASSERT_TRUE(write_file_atomic(killed, std::string_view("half a container")).ok());
  ASSERT_TRUE(write_file_atomic(killed_log, std::string_view("x")).ok());
  auto w = provider::Workdir::open_existing(s.dir / "wd");
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_TRUE(w->lock().ok());
  EXPECT_EQ(w->swept_temp_files(), 2u);
  EXPECT_FALSE(fs::exists(killed));
  EXPECT_FALSE(fs::exists(killed_log));
  EXPECT_TRUE(fs::exists(s.snapshot(2)));
}

TEST(Abuse, ConcurrentDownloadsShareOneLoadedContainer) {
  Stored s;
  store(s);
  auto catalog = provider::open_workdir_catalog(s.dir / "wd");
  ASSERT_TRUE(catalog.ok()) << catalog.error().message;
  auto first = (*catalog)->container({0, comp::Codec::kPlanes, std::nullopt});
  auto second = (*catalog)->container({0, comp::Codec::kPlanes, std::nullopt});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->get(), second->get());  // one buffer, however many stream it
}

TEST(Abuse, MadeUpBaseRootsDoNotCostAnEncodeEach) {
  Stored s;
  store(s);
  auto catalog = provider::open_workdir_catalog(s.dir / "wd");
  ASSERT_TRUE(catalog.ok()) << catalog.error().message;
  // Epoch 3 is stored as a delta (tiny_task stores full snapshots every 4 epochs), so a client
  // without its base gets one coded for it.
  std::vector<const Bytes*> served;
  for (std::uint8_t i = 1; i <= 5; ++i) {
    Digest made_up{};
    made_up.fill(i);
    auto c = (*catalog)->container({3, comp::Codec::kDelta, made_up});
    ASSERT_TRUE(c.ok()) << c.error().message;
    auto info = comp::read_container_info(**c);
    ASSERT_TRUE(info.ok());
    EXPECT_FALSE(info->base_root.has_value());  // a whole snapshot: the made-up base is unusable
    served.push_back(c->get());
  }
  for (const Bytes* p : served) EXPECT_EQ(p, served.front());
}

TEST(Abuse, ReadableSigningKeyIsRefusedWithTheChmod) {
  testing::ScratchDir dir;
  ASSERT_TRUE(generate_identity(dir / "keys").ok());
  const fs::path key = KeyFiles::in(dir / "keys").signing_key;
  ASSERT_TRUE(SigningKey::load(key).ok());
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  auto refused = SigningKey::load(key);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("chmod 600 " + key.string()), std::string::npos)
      << refused.error().message;
}

TEST(Abuse, KeygenFolderIsPrivateWhateverTheUmask) {
  testing::ScratchDir dir;
  const mode_t saved = ::umask(0);
  auto made = generate_identity(dir / "keys");
  ::umask(saved);
  ASSERT_TRUE(made.ok()) << made.error().message;
  struct stat st {};
  ASSERT_EQ(::stat((dir / "keys").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(KeyFiles::in(dir / "keys").signing_key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(Abuse, FifoAsTaskFileIsAnInputErrorNotAHang) {
  testing::ScratchDir dir;
  const fs::path fifo = dir / "task.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = testing::run_command(
      "timeout 20 " + testing::veritrain_binary() + " task show " + fifo.string(), dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("is not a regular file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vt::adversary
