// What strangers and broken clients get (docs/protocol.md, "Errors"), each while a well-behaved
// client on another connection keeps working.

#include <thread>

#include "tests/protocol/server_fixture.h"

namespace vt::testing {
namespace {

using HostileTest = ServerFixture;
using nlohmann::json;
using std::chrono::milliseconds;

// A TLS connection that pinned the server but has not said hello.
Connection raw_connection(const ClientConfig& config) {
  auto c = Connection::open(config);
  EXPECT_TRUE(c.ok()) << c.error().message;
  return std::move(*c);
}

std::string error_code_of(Connection& c) {
  auto frame = c.read_frame(milliseconds(5000));
  if (!frame.ok()) return "(read failed: " + frame.error().message + ")";
  if (frame->type != wire::MessageType::kError)
    return "(got " + std::string(wire::message_name(frame->type)) + ")";
  return frame->header.value("code", "(no code)");
}

void expect_still_served(Client& good, MemoryCatalog& catalog) {
  auto log = good.get_log(0);
  ASSERT_TRUE(log.ok()) << log.error().message;
  EXPECT_EQ(log->size(), 3u);
  auto task = good.get_task();
  ASSERT_TRUE(task.ok()) << task.error().message;
  EXPECT_EQ(*task, catalog.task_bytes());
}

TEST_F(HostileTest, WrongTokenIsRefusedAndDisconnected) {
  Client good = connect();
  ClientConfig bad = client_config();
  bad.token = "guess";
  auto refused = Client::connect(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, Errc::kRejected);  // the server's refusal, not our input
  EXPECT_NE(
      refused.error().message.find("unauthorized: hello: the bearer token is missing or wrong"),
      std::string::npos)
      << refused.error().message;

  // Skipping hello is no better: the first message must be hello, and the connection ends.
  Connection c = raw_connection(client_config());
  ASSERT_TRUE(c.send(wire::MessageType::kGetTask, json::object()).ok());
  EXPECT_EQ(error_code_of(c), "unauthorized");
  EXPECT_TRUE(c.wait_closed(milliseconds(5000)));
  expect_still_served(good, *catalog_);
  EXPECT_EQ(server_->metrics()->errors("unauthorized"), 2u);
}

TEST_F(HostileTest, WrongPinnedFingerprintIsRefusedBeforeAnyRequest) {
  Client good = connect();
  ClientConfig config = client_config();
  config.pin_sha256 = std::string(64, 'a');
  auto refused = Client::connect(config);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, Errc::kIo);
  EXPECT_NE(refused.error().message.find("the server certificate's SHA-256 is " + pin_ +
                                         ", not the pinned aaaa"),
            std::string::npos)
      << refused.error().message;
  config.pin_sha256.clear();
  auto no_pin = Client::connect(config);
  ASSERT_FALSE(no_pin.ok());
  EXPECT_NE(no_pin.error().message.find("certificate fingerprint to pin or a CA file"),
            std::string::npos);
  expect_still_served(good, *catalog_);
  EXPECT_EQ(server_->metrics()->requests(wire::MessageType::kHello),
            1u);  // the refused never said hello
}

TEST_F(HostileTest, OversizedFrameGetsFrameTooLargeAndIsClosed) {
  Client good = connect();
  Connection c = raw_connection(client_config());
  Bytes prefix = wire::encode_head(wire::MessageType::kHello, json::object(), 0);
  prefix.resize(wire::kPrefixSize);
  put_u32le(prefix.data() + 8, 1u << 30);  // a 1 GiB header, never sent
  ASSERT_TRUE(c.write(prefix).ok());
  EXPECT_EQ(error_code_of(c), "frame_too_large");
  EXPECT_TRUE(c.wait_closed(milliseconds(5000)));
  expect_still_served(good, *catalog_);
  EXPECT_EQ(server_->metrics()->errors("frame_too_large"), 1u);
}

TEST_F(HostileTest, GarbageGetsBadFrameAndIsClosed) {
  Client good = connect();
  Connection c = raw_connection(client_config());
  std::string garbage = "GET / HTTP/1.1\r\nHost: example\r\n\r\n";
  garbage +=
      std::string(100000, '\x5a');  // more than the server reads: it must not RST the reply away
  ASSERT_TRUE(c.write(as_bytes(garbage)).ok());
  EXPECT_EQ(error_code_of(c), "bad_frame");
  EXPECT_TRUE(c.wait_closed(milliseconds(5000)));
  expect_still_served(good, *catalog_);
  EXPECT_EQ(server_->metrics()->errors("bad_frame"), 1u);
}

TEST_F(HostileTest, HalfOpenConnectionsAreClosedByTimeouts) {
  Client good = connect();
  // Plain TCP to the TLS port that never sends a ClientHello.
  ClientConfig silent = client_config();
  silent.insecure = true;
  auto tcp = Connection::open(silent);
  ASSERT_TRUE(tcp.ok()) << tcp.error().message;
  // A TLS client that stops in the middle of its hello frame.
  Connection stalled = raw_connection(client_config());
  Bytes hello =
      wire::encode_frame(wire::MessageType::kHello, json{{"versions", {1}}, {"token", kToken}});
  ASSERT_TRUE(stalled.write(ByteSpan(hello).first(hello.size() - 3)).ok());

  auto start = std::chrono::steady_clock::now();
  expect_still_served(good, *catalog_);
  EXPECT_TRUE(tcp->wait_closed(milliseconds(8000)));
  EXPECT_TRUE(stalled.wait_closed(milliseconds(8000)));
  auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, milliseconds(1000));  // the 1.5 s handshake and read timeouts, not at once
  expect_still_served(good, *catalog_);
  // The client sees the close a moment before the session has counted it.
  for (int i = 0; i < 100 && server_->metrics()->active_connections() > 1; ++i)
    std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(server_->metrics()->errors("timeout"), 2u);
  EXPECT_EQ(server_->metrics()->active_connections(), 1);
}

TEST_F(HostileTest, BusyBeyondTheConnectionLimit) {
  ServerConfig config = configure();
  config.limits.max_connections = 1;
  server_.reset();
  start(config);
  Client good = connect();
  auto second = Client::connect(client_config());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("busy: the server is at its limit of 1 connections"),
            std::string::npos)
      << second.error().message;
  expect_still_served(good, *catalog_);
}

TEST_F(HostileTest, PlainTcpOnlyOnLoopback) {
  ServerConfig config = configure();
  config.insecure = true;
  config.host = "0.0.0.0";
  auto refused = Server::start(config, catalog_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("only allowed on a loopback address, not 0.0.0.0"),
            std::string::npos);

  config.host = "127.0.0.1";
  auto plain = Server::start(config, catalog_);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  ClientConfig c = client_config();
  c.insecure = true;
  c.pin_sha256.clear();
  c.port = (*plain)->endpoint().port;
  auto client = Client::connect(c);
  ASSERT_TRUE(client.ok()) << client.error().message;
  auto snapshot = client->get_snapshot(request(1));
  ASSERT_TRUE(snapshot.ok()) << snapshot.error().message;
  EXPECT_EQ(*snapshot, *catalog_->snapshot(1));

  c.host = "192.0.2.1";  // TEST-NET-1: refused before any packet is sent
  auto remote = Client::connect(c);
  ASSERT_FALSE(remote.ok());
  EXPECT_NE(remote.error().message.find("only allowed to a loopback address"), std::string::npos)
      << remote.error().message;
}

}  // namespace
}  // namespace vt::testing
