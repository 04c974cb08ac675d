// 32 clients download a snapshot at once over loopback TLS; every download must verify.

#include <thread>

#include "tests/protocol/server_fixture.h"

namespace vt::testing {
namespace {

class LoadTest : public ServerFixture {
  ServerConfig configure() override {
    ServerConfig config = ServerFixture::configure();
    config.limits.snapshot_chunk = 1u << 20;
    config.limits.handshake_timeout = std::chrono::seconds(30);
    config.limits.read_timeout = std::chrono::seconds(30);
    // Every client comes from 127.0.0.1 at once: lift the per-address shares for this test.
    config.limits.max_connections_per_address = 64;
    config.limits.max_unauthenticated = 64;
    config.limits.max_unauthenticated_per_address = 64;
    return config;
  }
};

TEST_F(LoadTest, ThirtyTwoConcurrentSnapshotDownloads) {
  constexpr int kClients = 32;
  // Warm the catalog's container cache so the clients measure transfer, not encoding.
  ASSERT_TRUE(catalog_->container({2, comp::Codec::kPlanes, std::nullopt}).ok());
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kClients);
  std::vector<std::uint64_t> bytes(kClients);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      ClientConfig config = client_config();
      config.io_timeout = std::chrono::seconds(60);
      auto client = Client::connect(config);
      if (!client.ok()) {
        errors[i] = client.error().message;
        return;
      }
      auto container = client->fetch_container(request(2));
      if (!container.ok()) {
        errors[i] = container.error().message;
        return;
      }
      bytes[i] = container->size();
      auto snapshot = client->get_snapshot(request(2));
      if (!snapshot.ok())
        errors[i] = snapshot.error().message;
      else if (*snapshot != *catalog_->snapshot(2))
        errors[i] = "snapshot bytes differ";
    });
  }
  for (auto& t : threads) t.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::uint64_t total = 0;
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(errors[i], "") << "client " << i;
    total += 2 * bytes[i];
  }
  double mbps = static_cast<double>(total) / 1e6 / seconds;
  std::cout << "load: " << kClients << " clients, " << total << " container bytes in " << seconds
            << " s = " << mbps
            << " MB/s (each client: fetch_container + get_snapshot with decode and root check)\n";
  RecordProperty("throughput_mb_per_s", std::to_string(mbps));
  EXPECT_EQ(server_->metrics()->connections_total(), static_cast<std::uint64_t>(kClients));
  EXPECT_EQ(server_->metrics()->requests(wire::MessageType::kGetSnapshot), 2u * kClients);
  EXPECT_EQ(server_->metrics()->errors_total(), 0u);
  EXPECT_EQ(catalog_->containers_built(), 1);
}

}  // namespace
}  // namespace vt::testing
