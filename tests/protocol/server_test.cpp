// Loopback TLS: what a verifier fetches, resumed downloads, subscriptions and metrics.

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <future>
#include <thread>

#include "common/process.h"
#include "tests/protocol/net_util.h"
#include "tests/protocol/server_fixture.h"

namespace vt::testing {
namespace {

using ServerTest = ServerFixture;
using std::chrono::milliseconds;

TEST_F(ServerTest, FetchesTaskLogAndSnapshotsOverTls) {
  Client client = connect();
  EXPECT_EQ(client.hello().version, 1u);
  EXPECT_EQ(client.hello().software, "veritrain/0.1");
  EXPECT_NE(
      std::find(client.hello().capabilities.begin(), client.hello().capabilities.end(), "resume"),
      client.hello().capabilities.end());

  auto task = client.get_task();
  ASSERT_TRUE(task.ok()) << task.error().message;
  EXPECT_EQ(*task, catalog_->task_bytes());

  auto log = client.get_log(0);
  ASSERT_TRUE(log.ok()) << log.error().message;
  ASSERT_EQ(log->size(), 3u);
  auto check = verify_log(*log, catalog_->task_id(), catalog_->signer());
  EXPECT_TRUE(check.ok()) << check.error().message;
  auto tail = client.get_log(2);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 1u);
  EXPECT_EQ((*tail)[0].hash, (*log)[2].hash);
  EXPECT_EQ(client.get_log(7)->size(), 0u);

  for (auto codec : {comp::Codec::kPlanes, comp::Codec::kRaw, comp::Codec::kZstd}) {
    auto snapshot = client.get_snapshot(request(2, codec));
    ASSERT_TRUE(snapshot.ok()) << comp::codec_name(codec) << ": " << snapshot.error().message;
    EXPECT_EQ(*snapshot, *catalog_->snapshot(2)) << comp::codec_name(codec);
  }
}

TEST_F(ServerTest, DeltaAgainstTheSnapshotTheClientHolds) {
  Client client = connect();
  auto before = catalog_->snapshot(1);
  SnapshotRequest r = request(2);
  auto full = client.fetch_container(r);
  ASSERT_TRUE(full.ok()) << full.error().message;
  r.base = *before;
  auto delta = client.fetch_container(r);
  ASSERT_TRUE(delta.ok()) << delta.error().message;
  EXPECT_EQ(comp::read_container_info(*delta)->codec, comp::Codec::kDelta);
  EXPECT_LT(delta->size(), full->size());
  auto snapshot = client.get_snapshot(r);
  ASSERT_TRUE(snapshot.ok()) << snapshot.error().message;
  EXPECT_EQ(*snapshot, *catalog_->snapshot(2));
}

TEST_F(ServerTest, RefusesASnapshotThatIsNotTheCommittedOne) {
  Client client = connect();
  SnapshotRequest r = request(2);
  r.root = catalog_->root(1);  // the log says otherwise: the bytes must not be accepted
  auto snapshot = client.get_snapshot(r);
  ASSERT_FALSE(snapshot.ok());
  EXPECT_EQ(snapshot.error().code, Errc::kRejected);
  EXPECT_NE(
      snapshot.error().message.find("but the log commits to " + hex_encode(catalog_->root(1))),
      std::string::npos)
      << snapshot.error().message;
}

TEST_F(ServerTest, ChunksComeWithInclusionProofs) {
  Client client = connect();
  std::vector<std::uint64_t> indices = {3, 0};
  auto chunks = client.get_chunks(1, catalog_->root(1), indices);
  ASSERT_TRUE(chunks.ok()) << chunks.error().message;
  ASSERT_EQ(chunks->size(), 2u);
  const Bytes& canonical = *catalog_->snapshot(1);
  EXPECT_EQ((*chunks)[0].proof.chunk_index, 3u);
  EXPECT_EQ((*chunks)[0].bytes,
            Bytes(canonical.begin() + 3 * fp::kMerkleChunkSize, canonical.end()));
  EXPECT_EQ((*chunks)[1].bytes, Bytes(canonical.begin(), canonical.begin() + fp::kMerkleChunkSize));

  auto wrong_root = client.get_chunks(1, catalog_->root(0), indices);
  ASSERT_FALSE(wrong_root.ok());
  EXPECT_EQ(wrong_root.error().code, Errc::kRejected);

  std::vector<std::uint64_t> missing = {4};
  auto out_of_range = client.get_chunks(1, catalog_->root(1), missing);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.error().message.find("bad_request: get_chunks: chunk 4 does not exist"),
            std::string::npos)
      << out_of_range.error().message;
  // The client stopped reading at the bad proof and had to reconnect; the bad_request error was a
  // whole answer and left the connection usable.
  EXPECT_TRUE(client.get_task().ok());
  EXPECT_EQ(server_->metrics()->connections_total(), 2u);
}

// Downloads `r` into `partial` until half of it arrived, as a caller that gives up would; returns
// the bytes held then.
std::uint64_t stop_half_way(Client& client, const SnapshotRequest& r, PartialDownload& partial) {
  std::uint64_t stopped_at = 0;
  auto first = client.get_snapshot(
      r,
      [&](const SnapshotProgress& p) {
        stopped_at = p.received;
        return p.received < p.total / 2;
      },
      &partial);
  EXPECT_FALSE(first.ok());
  if (!first.ok()) {
    EXPECT_NE(first.error().message.find("stopped by the caller"), std::string::npos)
        << first.error().message;
  }
  EXPECT_GT(partial.bytes.size(), 0u);
  EXPECT_EQ(partial.bytes.size(), stopped_at);
  EXPECT_LT(partial.bytes.size(), partial.total);
  return stopped_at;
}

// Continues `partial` to the end; `first_received` is the byte count at the first progress report.
Result<Bytes> continue_download(Client& client, const SnapshotRequest& r, PartialDownload& partial,
                                std::uint64_t& first_received) {
  first_received = 0;
  return client.get_snapshot(
      r,
      [&](const SnapshotProgress& p) {
        if (first_received == 0) first_received = p.received;
        return true;
      },
      &partial);
}

TEST_F(ServerTest, ResumesADownloadStoppedInTheMiddle) {
  Client client = connect();
  PartialDownload partial;
  const std::uint64_t stopped_at = stop_half_way(client, request(2), partial);
  std::uint64_t first_received = 0;
  auto second = continue_download(client, request(2), partial, first_received);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(*second, *catalog_->snapshot(2));
  EXPECT_GT(first_received, stopped_at);  // continued, not restarted
  EXPECT_LE(first_received, stopped_at + (256u << 10));
  EXPECT_EQ(server_->metrics()->resumes(), 1u);
}

TEST_F(ServerTest, AResumeOfAContainerThatChangedRestartsFromTheStart) {
  Client client = connect();
  PartialDownload partial;
  stop_half_way(client, request(2), partial);
  const std::string old_id = partial.container_id;
  catalog_->recode_at_level(5);  // same snapshot, other container bytes

  std::uint64_t first_received = 0;
  auto second = continue_download(client, request(2), partial, first_received);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(*second, *catalog_->snapshot(2));
  EXPECT_LE(first_received, 256u << 10);  // started over: no byte of the old container was kept
  EXPECT_EQ(server_->metrics()->resumes(), 0u);

  // The id follows the bytes: the re-coded container has another, asking again gives the same.
  auto stop_at_once = [](const SnapshotProgress&) { return false; };
  PartialDownload probe1, probe2;
  ASSERT_FALSE(client.get_snapshot(request(2), stop_at_once, &probe1).ok());
  ASSERT_FALSE(client.get_snapshot(request(2), stop_at_once, &probe2).ok());
  EXPECT_EQ(probe1.container_id, probe2.container_id);
  EXPECT_NE(probe1.container_id, old_id);
}

// Downloads epoch 2 (raw) from `server` through a relay that damages the first connection
// half-way through the container, and checks the client ends with the committed snapshot after
// exactly one resume on a second connection.
void expect_one_resume_through(Server& server, CuttingProxy::Fault fault, ClientConfig config,
                               MemoryCatalog& catalog, const SnapshotRequest& request) {
  auto container = catalog.container({2, comp::Codec::kRaw, std::nullopt});
  ASSERT_TRUE(container.ok());
  CuttingProxy proxy(server.endpoint().port, (*container)->size() / 2, fault);
  config.port = proxy.port();
  auto client = Client::connect(config);
  ASSERT_TRUE(client.ok()) << client.error().message;
  std::uint64_t resumes = 0;
  auto snapshot = client->get_snapshot(request, [&](const SnapshotProgress& p) {
    resumes = p.resumes;
    return true;
  });
  ASSERT_TRUE(snapshot.ok()) << snapshot.error().message;
  EXPECT_EQ(*snapshot, *catalog.snapshot(2));
  EXPECT_EQ(resumes, 1u);
  EXPECT_EQ(proxy.connections(), 2);
  EXPECT_EQ(server.metrics()->resumes(), 1u);
}

TEST_F(ServerTest, ResumesAfterTheConnectionIsCut) {
  expect_one_resume_through(*server_, CuttingProxy::Fault::kCut, client_config(), *catalog_,
                            request(2, comp::Codec::kRaw));
}

// A bit flipped on the way: over TLS the record's AEAD tag fails and the connection breaks; over
// plain TCP the data frame's xxh3 fails. Either way the client keeps its verified prefix, resumes
// on a new connection and ends with the committed snapshot.
TEST_F(ServerTest, ABitFlippedInTransitOverTlsIsCaughtAndResumed) {
  expect_one_resume_through(*server_, CuttingProxy::Fault::kFlipBit, client_config(), *catalog_,
                            request(2, comp::Codec::kRaw));
}

TEST_F(ServerTest, ABitFlippedInTransitOverPlainTcpIsCaughtByTheFrameChecksum) {
  ServerConfig insecure = configure();
  insecure.insecure = true;
  auto plain_server = Server::start(std::move(insecure), catalog_);
  ASSERT_TRUE(plain_server.ok()) << plain_server.error().message;
  ClientConfig config = client_config();
  config.insecure = true;
  config.pin_sha256.clear();
  expect_one_resume_through(**plain_server, CuttingProxy::Fault::kFlipBit, config, *catalog_,
                            request(2, comp::Codec::kRaw));
}

TEST_F(ServerTest, SubscriberSeesCommitmentsAsTheyBecomeDurable) {
  std::vector<std::uint64_t> seen;
  std::mutex mutex;
  std::condition_variable cv;
  Status result;
  std::thread subscriber([&] {
    auto client = Client::connect(client_config());
    if (!client.ok()) {
      result = client.error();
      return;
    }
    result = client->subscribe(
        0,
        [&](const SignedRecord& r) {
          std::lock_guard lock(mutex);
          seen.push_back(r.record.epoch);
          cv.notify_all();
          return r.record.epoch < 4;
        },
        std::chrono::seconds(10));
  });
  auto wait_for = [&](std::size_t n) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return seen.size() >= n; });
  };
  ASSERT_TRUE(wait_for(3));  // the epochs durable before it subscribed
  for (int i = 0; i < 2; ++i) {
    catalog_->add_epoch();
    server_->notify_commit(3 + i);
    ASSERT_TRUE(wait_for(4 + i));
  }
  subscriber.join();
  EXPECT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(server_->metrics()->epochs_committed(), 5u);
}

TEST_F(ServerTest, MetricsInPrometheusTextFormat) {
  auto metrics = MetricsServer::start("127.0.0.1", 0, server_->metrics());
  ASSERT_TRUE(metrics.ok()) << metrics.error().message;
  Client client = connect();
  ASSERT_TRUE(client.get_task().ok());
  ASSERT_TRUE(client.get_snapshot(request(0)).ok());
  std::string text = http_get((*metrics)->port(), "/metrics");
  EXPECT_NE(text.find("HTTP/1.1 200 OK"), std::string::npos) << text;
  EXPECT_NE(text.find("veritrain_requests_total{type=\"get_task\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("veritrain_requests_total{type=\"get_snapshot\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("veritrain_active_connections 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("veritrain_epochs_committed 3\n"), std::string::npos) << text;
  EXPECT_GT(server_->metrics()->bytes_sent(), catalog_->snapshot(0)->size() / 4);
  EXPECT_NE(
      text.find("veritrain_bytes_sent_total " + std::to_string(server_->metrics()->bytes_sent())),
      std::string::npos);
  EXPECT_NE(http_get((*metrics)->port(), "/").find("404"), std::string::npos);
}

TEST_F(ServerTest, OpensslCompletesATls13Handshake) {
  if (!have_program("openssl")) GTEST_SKIP() << "no openssl CLI";
  auto r = run_command("echo | timeout 20 openssl s_client -tls1_3 -brief -connect 127.0.0.1:" +
                           std::to_string(server_->endpoint().port),
                       dir_.path());
  std::string all = r.out + r.err;
  EXPECT_EQ(r.exit_code, 0) << all;
  EXPECT_NE(all.find("Protocol version: TLSv1.3"), std::string::npos) << all;
  auto tls12 = run_command("echo | timeout 20 openssl s_client -tls1_2 -brief -connect 127.0.0.1:" +
                               std::to_string(server_->endpoint().port),
                           dir_.path());
  EXPECT_NE(tls12.exit_code, 0) << "TLS 1.2 must be refused: " << tls12.out << tls12.err;
}

// Socket activation (`serve --listen fd:N`): a client that connects before the server exists
// waits in the backlog, and is served once the server adopts the listening socket.
TEST_F(ServerTest, ServesOnAnInheritedListeningSocketAClientThatConnectedFirst) {
  auto listener = listen_on_loopback();
  ASSERT_TRUE(listener.ok()) << listener.error().message;
  ClientConfig early = client_config();
  early.port = listener->port;
  auto pending = std::async(std::launch::async, [early] { return Client::connect(early); });
  std::this_thread::sleep_for(milliseconds(300));  // the client is in the backlog by now
  ServerConfig config = configure();
  config.listen_fd = listener->fd.release();
  auto adopted = Server::start(std::move(config), catalog_);
  ASSERT_TRUE(adopted.ok()) << adopted.error().message;
  EXPECT_EQ((*adopted)->endpoint().port, listener->port);
  EXPECT_EQ((*adopted)->endpoint().host, "127.0.0.1");
  auto client = pending.get();
  ASSERT_TRUE(client.ok()) << client.error().message;
  auto task = client->get_task();
  ASSERT_TRUE(task.ok()) << task.error().message;
  EXPECT_EQ(*task, catalog_->task_bytes());
}

TEST_F(ServerTest, AnInheritedDescriptorMustBeAListeningTcpSocket) {
  auto refused = [&](int fd, bool insecure = false) {
    ServerConfig config = configure();
    config.listen_fd = fd;
    config.insecure = insecure;
    auto s = Server::start(std::move(config), catalog_);
    EXPECT_FALSE(s.ok());
    return s.ok() ? std::string() : s.error().message;
  };
  EXPECT_NE(refused(1000).find("descriptor 1000 is not open"), std::string::npos) << refused(1000);
  const Fd file(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  EXPECT_NE(refused(file.get()).find("is not a socket"), std::string::npos);
  const Fd datagram(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  EXPECT_NE(refused(datagram.get()).find("is not a TCP socket"), std::string::npos);
  const Fd quiet(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_NE(refused(quiet.get()).find("is not listening"), std::string::npos);
  // Plain TCP stays loopback-only, whoever bound the socket.
  const Fd wide(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  ASSERT_EQ(::bind(wide.get(), reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
  ASSERT_EQ(::listen(wide.get(), 4), 0);
  EXPECT_NE(refused(wide.get(), true).find("only allowed on a loopback address"),
            std::string::npos);
}

}  // namespace
}  // namespace vt::testing
