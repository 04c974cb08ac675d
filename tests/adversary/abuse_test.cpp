// Hostile files and requests against the provider's store and the verifier's sources: a sparse
// 64 GiB snapshot, temp files of a killed write, readable secrets, a FIFO as task.json, one
// container shared by concurrent downloads, made-up delta bases that must not cost an encode,
// served files swapped for links out of the workdir.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>

#include "common/file_io.h"
#include "protocol/net/client.h"
#include "protocol/net/server.h"
#include "provider/workdir/workdir.h"
#include "provider/workdir_catalog.h"
#include "tests/adversary/support.h"

namespace vt::adversary {
namespace {

namespace fs = std::filesystem;

struct AbusedRun : StoredRun {
  AbusedRun() : StoredRun(31) {}
};

pid_t exited_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

TEST(Abuse, SparseSnapshotFarAboveTheTaskStateIsAFailureNotAnAbort) {
  AbusedRun s;
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
  AbusedRun s;
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
  // 3 epochs: at most 4 records of what this task's records can take (far below 64 MiB each).
  EXPECT_NE(why.find("the commitment log: "), std::string::npos) << why;
  const std::string limit = "is 322122547200 bytes, more than the limit of ";
  const auto at = why.find(limit);
  ASSERT_NE(at, std::string::npos) << why;
  EXPECT_LT(std::stoull(why.substr(at + limit.size())), std::uint64_t{4} << 20) << why;
}

TEST(Abuse, ResumeSweepsTempFilesOfAKilledWrite) {
  AbusedRun s;
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
  AbusedRun s;
  store(s);
  auto catalog = provider::open_workdir_catalog(s.dir / "wd");
  ASSERT_TRUE(catalog.ok()) << catalog.error().message;
  auto first = (*catalog)->container({0, comp::Codec::kPlanes, std::nullopt});
  auto second = (*catalog)->container({0, comp::Codec::kPlanes, std::nullopt});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->get(), second->get());  // one buffer, however many stream it
}

TEST(Abuse, MadeUpBaseRootsDoNotCostAnEncodeEach) {
  AbusedRun s;
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

// A file elsewhere on the provider's machine that a link in the workdir points at.
fs::path outside_file(const fs::path& dir) {
  fs::path secret = dir / "elsewhere" / "secret.txt";
  fs::create_directories(secret.parent_path());
  EXPECT_TRUE(write_file_atomic(secret, std::string_view("not for peers\n")).ok());
  return secret;
}

// `catalog` served on a loopback port (plain TCP) and a client connected to it.
void serve_locally(const std::shared_ptr<Catalog>& catalog, std::unique_ptr<Server>& server,
                   std::optional<Client>& client) {
  ServerConfig config;
  config.insecure = true;
  config.token = "token";
  auto started = Server::start(config, catalog);
  ASSERT_TRUE(started.ok()) << started.error().message;
  server = std::move(*started);
  ClientConfig c;
  c.port = server->endpoint().port;
  c.insecure = true;
  c.token = "token";
  auto connected = Client::connect(c);
  ASSERT_TRUE(connected.ok()) << connected.error().message;
  client.emplace(std::move(*connected));
}

TEST(Abuse, TaskFileSwappedForALinkOutOfTheWorkdirIsNotServed) {
  AbusedRun s;
  store(s);
  auto catalog = provider::open_workdir_catalog(s.workdir());
  ASSERT_TRUE(catalog.ok()) << catalog.error().message;
  ASSERT_TRUE((*catalog)->task().ok());
  // While serving, task.json becomes a link to a file outside the workdir.
  const fs::path task_file = s.workdir() / "task.json";
  fs::remove(task_file);
  fs::create_symlink(outside_file(s.dir.path()), task_file);
  auto served = (*catalog)->task();
  ASSERT_FALSE(served.ok()) << "served: " << std::string(served->begin(), served->end());
  EXPECT_EQ(served.error().message, task_file.string() + ": is a symbolic link; only regular " +
                                        "files inside " + s.workdir().string() +
                                        " are read, links are not followed");
  // Over the wire the client gets an error, not the file's bytes.
  std::unique_ptr<Server> server;
  std::optional<Client> client;
  ASSERT_NO_FATAL_FAILURE(serve_locally(*catalog, server, client));
  auto task = client->get_task();
  ASSERT_FALSE(task.ok());
  EXPECT_NE(task.error().message.find("the server answered internal: task: " + task_file.string() +
                                      ": is a symbolic link"),
            std::string::npos)
      << task.error().message;
}

// A committed epoch whose stored container is corrupt is the provider's own failure: over the
// wire it is "unusable_state" (the client takes it as the provider's fault, a rejection), not
// "not_found", and the message says what is wrong without the provider's paths.
TEST(Abuse, ACorruptStoredStateIsUnusableOverTheWireAndNamesNoPath) {
  AbusedRun s;
  store(s);
  Result<Bytes> bytes = read_file(s.snapshot(1));
  ASSERT_TRUE(bytes.ok());
  (*bytes)[bytes->size() / 2] ^= 0x10;
  ASSERT_TRUE(write_file_atomic(s.snapshot(1), *bytes).ok());
  auto catalog = provider::open_workdir_catalog(s.workdir());
  ASSERT_TRUE(catalog.ok()) << catalog.error().message;
  std::unique_ptr<Server> server;
  std::optional<Client> client;
  ASSERT_NO_FATAL_FAILURE(serve_locally(*catalog, server, client));
  // Epoch 2 is stored as a delta on epoch 1: the server must decode 1 to produce it.
  for (std::uint64_t epoch : {1u, 2u}) {
    SnapshotRequest request;
    request.epoch = epoch;
    request.root = s.run.roots.at(epoch);
    auto state = client->get_snapshot(request);
    ASSERT_FALSE(state.ok()) << "epoch " << epoch;
    const std::string& why = state.error().message;
    EXPECT_EQ(state.error().code, Errc::kRejected) << why;
    EXPECT_NE(why.find("the server answered unusable_state: "), std::string::npos) << why;
    EXPECT_NE(
        why.find("the state stored for committed epoch " + std::to_string(epoch) + " is unusable"),
        std::string::npos)
        << why;
    EXPECT_EQ(why.find(s.dir.path().string()), std::string::npos) << why;
    EXPECT_EQ(why.find("snapshots/"), std::string::npos) << why;
  }
  // An epoch not committed is still the request's mistake.
  SnapshotRequest uncommitted;
  uncommitted.epoch = 99;
  auto later = client->get_snapshot(uncommitted);
  ASSERT_FALSE(later.ok());
  EXPECT_NE(later.error().message.find("not_found"), std::string::npos) << later.error().message;
}

TEST(Abuse, SnapshotsAndLogBehindLinksAreNotServed) {
  AbusedRun s;
  store(s);
  auto catalog = provider::open_workdir_catalog(s.workdir());
  ASSERT_TRUE(catalog.ok()) << catalog.error().message;
  // A container replaced by a link to a copy of itself outside: the bytes would pass every
  // check, and are still not read through the link.
  const fs::path copy = s.dir / "elsewhere" / "copy.vtc";
  fs::create_directories(copy.parent_path());
  fs::copy_file(s.snapshot(0), copy);
  fs::remove(s.snapshot(0));
  fs::create_symlink(copy, s.snapshot(0));
  auto container = (*catalog)->container({0, comp::Codec::kPlanes, std::nullopt});
  ASSERT_FALSE(container.ok());
  EXPECT_NE(container.error().message.find(s.snapshot(0).string() + ": is a symbolic link"),
            std::string::npos)
      << container.error().message;
  // The whole snapshots folder behind a link.
  const fs::path moved = s.dir / "elsewhere" / "snapshots";
  fs::rename(s.workdir() / "snapshots", moved);
  fs::create_symlink(moved, s.workdir() / "snapshots");
  auto chained = (*catalog)->canonical_snapshot(2);
  ASSERT_FALSE(chained.ok());
  EXPECT_NE(chained.error().message.find("passes through a symbolic link"), std::string::npos)
      << chained.error().message;
  // The log behind a link.
  const fs::path log = s.workdir() / "commitments.log";
  fs::rename(log, s.dir / "elsewhere" / "commitments.log");
  fs::create_symlink(s.dir / "elsewhere" / "commitments.log", log);
  auto records = (*catalog)->log_records(0);
  ASSERT_FALSE(records.ok());
  EXPECT_NE(records.error().message.find(log.string() + ": is a symbolic link"), std::string::npos)
      << records.error().message;
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
