#pragma once
// A TLS server on 127.0.0.1:0 over a MemoryCatalog, with its own key folder, and clients that
// pin its certificate.

#include <gtest/gtest.h>

#include "protocol/keys.h"
#include "protocol/net/client.h"
#include "protocol/net/server.h"
#include "tests/protocol/memory_catalog.h"
#include "tests/test_util.h"

namespace vt::testing {

inline constexpr char kToken[] = "correct horse battery staple";

class ServerFixture : public ::testing::Test {
 protected:
  // 3 MiB of weights: four Merkle chunks, the last one short.
  static constexpr std::size_t kFloats = 3 * 262144 + 1000;

  void SetUp() override {
    auto identity = generate_identity(dir_ / "keys");
    ASSERT_TRUE(identity.ok()) << identity.error().message;
    keys_ = KeyFiles::in(dir_ / "keys");
    pin_ = identity->tls_cert_fingerprint;
    catalog_ = make_catalog();
    for (int e = 0; e < 3; ++e) catalog_->add_epoch();
    start(configure());
  }

  virtual std::shared_ptr<MemoryCatalog> make_catalog() {
    return std::make_shared<MemoryCatalog>(kFloats);
  }

  virtual ServerConfig configure() {
    ServerConfig config;
    config.tls_cert = keys_.tls_cert;
    config.tls_key = keys_.tls_key;
    config.token = kToken;
    config.threads = 4;
    config.limits.snapshot_chunk = 256u << 10;
    config.limits.handshake_timeout = std::chrono::milliseconds(1500);
    config.limits.read_timeout = std::chrono::milliseconds(1500);
    return config;
  }

  void start(ServerConfig config) {
    auto server = Server::start(std::move(config), catalog_);
    ASSERT_TRUE(server.ok()) << server.error().message;
    server_ = std::move(*server);
  }

  ClientConfig client_config() const {
    ClientConfig c;
    c.port = server_->endpoint().port;
    c.token = kToken;
    c.pin_sha256 = pin_;
    c.connect_timeout = std::chrono::seconds(10);
    c.io_timeout = std::chrono::seconds(20);
    return c;
  }

  Client connect() {
    auto c = Client::connect(client_config());
    EXPECT_TRUE(c.ok()) << c.error().message;
    return std::move(*c);
  }

  SnapshotRequest request(std::uint64_t epoch, comp::Codec codec = comp::Codec::kPlanes) const {
    SnapshotRequest r;
    r.epoch = epoch;
    r.root = catalog_->root(epoch);
    r.codec = codec;
    return r;
  }

  ScratchDir dir_;
  KeyFiles keys_;
  std::string pin_;
  std::shared_ptr<MemoryCatalog> catalog_;
  std::unique_ptr<Server> server_;
};

}  // namespace vt::testing
