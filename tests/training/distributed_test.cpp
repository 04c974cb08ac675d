// Collective on loopback, two ranks as two threads of one process: what a follower accepts
// from rank 0 through the TCPStore is bounded before it allocates.
#include "training/distributed.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/process.h"

namespace vt::training {
namespace {

TEST(Collective, AFollowerRefusesABroadcastAboveItsLimitBeforeAllocating) {
  auto port = free_loopback_port();
  ASSERT_TRUE(port.ok()) << port.error().message;
  DistributedOptions o;
  o.world_size = 2;
  o.master_port = *port;
  o.timeout = std::chrono::milliseconds(3000);
  Bytes sent(1000);
  for (std::size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<std::uint8_t>(i * 31 + 7);

  Status first0, second0;
  std::thread root([&] {
    DistributedOptions mine = o;
    mine.rank = 0;
    auto c = Collective::connect(mine);
    if (!c.ok()) {
      first0 = c.error();
      return;
    }
    Bytes a = sent;
    first0 = (*c)->broadcast(a);
    Bytes b = sent;
    b.push_back(0);  // 1001 bytes: one more than the follower takes
    second0 = (*c)->broadcast(b);
  });
  DistributedOptions mine = o;
  mine.rank = 1;
  auto c = Collective::connect(mine);
  if (!c.ok()) {
    root.join();
    if (c.error().message.find("Gloo") != std::string::npos) GTEST_SKIP() << c.error().message;
    FAIL() << c.error().message;
  }
  Bytes got;
  Status first = (*c)->broadcast(got, 1000);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(got, sent);
  Bytes refused;
  Status second = (*c)->broadcast(refused, 1000);
  root.join();
  EXPECT_TRUE(first0.ok()) << first0.error().message;
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("announces 1001 bytes"), std::string::npos)
      << second.error().message;
  EXPECT_NE(second.error().message.find("outside 0 ... 1000"), std::string::npos)
      << second.error().message;
  EXPECT_TRUE(refused.empty()) << "allocated before the bound was checked";
  EXPECT_FALSE(second0.ok()) << "rank 0 must notice that its follower left the broadcast";
}

}  // namespace
}  // namespace vt::training
