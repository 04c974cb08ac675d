// The server under a sustained flood (docs/protocol.md, "Under abuse"): connections that never
// send a byte, each replaced as soon as the server drops it, from the verifier's own address,
// must not keep a verifier out. bench_flood measures the same with latencies
// (docs/benchmarks.md, "Under a flood").

#include <thread>

#include "tests/protocol/flood.h"
#include "tests/protocol/server_fixture.h"
#include "tests/test_util.h"

namespace vt::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

struct Probes {
  int answered = 0;
  int tries = 0;
  std::string first_failure;
};

// What a verifier does, `tries` times: connect, hello, get_task, on a fresh connection.
Probes probe(const ClientConfig& config, int tries) {
  Probes out;
  for (; out.tries < tries; ++out.tries) {
    auto client = Client::connect(config);
    auto task = client ? client->get_task() : Result<Bytes>(client.error());
    if (task.ok()) {
      ++out.answered;
    } else if (out.first_failure.empty()) {
      out.first_failure = task.error().message;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  return out;
}

class FloodTest : public ServerFixture, public ::testing::WithParamInterface<std::size_t> {};

TEST_P(FloodTest, ChurningSilentConnectionsFromTheVerifiersAddressDoNotKeepItOut) {
  SilentFloodOptions options;
  options.port = server_->endpoint().port;
  options.count = GetParam();
  options.duration = milliseconds(60'000);
  SilentFlood flood(options);
  std::this_thread::sleep_for(milliseconds(500));
  ClientConfig config = client_config();
  config.connect_timeout = milliseconds(5'000);
  const Probes p = probe(config, 100);
  flood.stop();
  std::cout << "flood: " << GetParam() << " churning silent connections (" << flood.opened()
            << " opened): " << p.answered << " of " << p.tries << " get_task answered\n";
  EXPECT_GE(p.answered, 99) << p.first_failure;
}

INSTANTIATE_TEST_SUITE_P(Silent, FloodTest, ::testing::Values(70, 500), ValueName());

}  // namespace
}  // namespace vt::testing
