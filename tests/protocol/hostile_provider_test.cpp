// A provider that answers, but never finishes or answers too much: the client ends every such
// exchange with a rejection (the provider's fault) within its limits, holding bounded memory.

#include "tests/protocol/hostile_provider.h"

#include <gtest/gtest.h>

#include "protocol/net/client.h"
#include "tests/protocol/memory_catalog.h"
#include "tests/test_util.h"

namespace vt::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

ClientConfig plain_config(std::uint16_t port) {
  ClientConfig c;
  c.port = port;
  c.insecure = true;
  c.token = "any token will do here";
  c.connect_timeout = std::chrono::seconds(5);
  c.io_timeout = std::chrono::seconds(5);
  return c;
}

// A log of 10 well-formed epochs: more than the tests' task of 3 epochs allows.
HostileOptions with_log(Hostility mode) {
  MemoryCatalog catalog(1024);
  for (int e = 0; e < 10; ++e) catalog.add_epoch();
  HostileOptions o;
  o.mode = mode;
  o.task = catalog.task_bytes();
  auto records = catalog.log_records(0);
  EXPECT_TRUE(records.ok());
  for (const SignedRecord& r : *records) o.log_lines.push_back(encode_record(r));
  return o;
}

TEST(HostileProvider, HelloNestedHundredThousandDeepIsRefusedNotACrash) {
  HostileOptions o;
  o.mode = Hostility::kDeepHello;
  HostileProvider provider(o);
  auto client = Client::connect(plain_config(provider.port()));
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.error().message.find("JSON nested deeper than 64 levels"), std::string::npos)
      << client.error().message;
}

TEST(HostileProvider, AMalformedHelloIsTheProvidersFaultNotTheCallersInput) {
  HostileOptions o;
  o.mode = Hostility::kHugeHelloHeader;
  HostileProvider provider(o);
  auto client = Client::connect(plain_config(provider.port()));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.error().code, Errc::kRejected) << client.error().message;
  EXPECT_NE(
      client.error().message.find("hello frame: header of 4294967295 bytes exceeds the limit"),
      std::string::npos)
      << client.error().message;
}

TEST(HostileProvider, AMalformedFrameAfterHelloIsTheProvidersFault) {
  HostileProvider provider(with_log(Hostility::kMalformedLog));
  auto client = Client::connect(plain_config(provider.port()));
  ASSERT_TRUE(client.ok()) << client.error().message;
  auto log = client->get_log(0, 4);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.error().code, Errc::kRejected) << log.error().message;
  EXPECT_NE(log.error().message.find("bad magic"), std::string::npos) << log.error().message;
}

TEST(HostileProvider, EndlessLogStopsAtTheRecordsTheTaskAllows) {
  HostileProvider provider(with_log(Hostility::kEndlessLog));
  auto client = Client::connect(plain_config(provider.port()));
  ASSERT_TRUE(client.ok()) << client.error().message;
  auto log = client->get_log(0, LogBounds(/*most_records=*/4));  // a task of 3 epochs: records 0..3
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.error().code, Errc::kRejected);
  EXPECT_NE(log.error().message.find("epoch 4 (line 5): the log goes on past the 4 records the "
                                     "task allows (epochs 0 to 3)"),
            std::string::npos)
      << log.error().message;
}

// A record longer than any of the task's can be is refused before it is parsed, however well
// formed.
TEST(HostileProvider, ARecordLongerThanTheTaskAllowsIsRefusedBeforeItIsParsed) {
  HostileProvider provider(with_log(Hostility::kEndlessLog));
  auto client = Client::connect(plain_config(provider.port()));
  ASSERT_TRUE(client.ok()) << client.error().message;
  auto log = client->get_log(0, LogBounds(4, 256));
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.error().code, Errc::kRejected);
  EXPECT_NE(log.error().message.find("epoch 0 (line 1): a record of "), std::string::npos)
      << log.error().message;
  EXPECT_NE(log.error().message.find("bytes, more than a record of this task can take (256)"),
            std::string::npos)
      << log.error().message;
}

// Records whose signatures do not verify under the log's key end the read at the first of them.
TEST(HostileProvider, AForgedRecordEndsTheReadAtItsEpoch) {
  HostileOptions o = with_log(Hostility::kForgedEndlessLog);
  o.forge_from = 2;
  o.frame_bytes = 1 << 16;
  HostileProvider provider(o);
  auto client = Client::connect(plain_config(provider.port()));
  ASSERT_TRUE(client.ok()) << client.error().message;
  auto log = client->get_log(0, 100);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.error().code, Errc::kRejected);
  EXPECT_NE(log.error().message.find(
                "epoch 2 (line 3): signature does not verify (the record was changed after "
                "signing)"),
            std::string::npos)
      << log.error().message;
  EXPECT_LT(provider.frames_sent(), 20u);
}

TEST(HostileProvider, EmptyLogFramesForEverAreRejected) {
  HostileProvider provider(with_log(Hostility::kEmptyLogFrames));
  auto client = Client::connect(plain_config(provider.port()));
  ASSERT_TRUE(client.ok()) << client.error().message;
  auto log = client->get_log(0, 100);  // the cap is not what ends it
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.error().code, Errc::kRejected);
  EXPECT_NE(
      log.error().message.find("a log frame after epoch 10 promises more records but carries none"),
      std::string::npos)
      << log.error().message;
}

TEST(HostileProvider, DeclaredSnapshotFarAboveTheStateIsRefusedBeforeAllocating) {
  HostileOptions o;
  o.declared_size = std::uint64_t{60} << 30;  // 60 GiB for a task whose state is 1 MiB
  HostileProvider provider(o);
  ClientConfig config = plain_config(provider.port());
  config.max_snapshot_bytes = 1u << 20;
  auto client = Client::connect(config);
  ASSERT_TRUE(client.ok()) << client.error().message;
  SnapshotRequest request;
  request.root = Digest{};
  auto got = client->fetch_container(request);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, Errc::kRejected);
  EXPECT_NE(got.error().message.find(
                "the container is 64424509440 bytes, more than a snapshot of this task can take"),
            std::string::npos)
      << got.error().message;
}

TEST(HostileProvider, DrippingSnapshotFailsTheMinimumTransferRate) {
  HostileOptions o;
  o.drip_every = milliseconds(50);  // 20 bytes a second, each frame far within io_timeout
  HostileProvider provider(o);
  ClientConfig config = plain_config(provider.port());
  config.progress_window = milliseconds(1000);
  auto client = Client::connect(config);
  ASSERT_TRUE(client.ok()) << client.error().message;
  SnapshotRequest request;
  const auto start = Clock::now();
  auto got = client->fetch_container(request);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, Errc::kRejected);
  EXPECT_NE(got.error().message.find("below the minimum transfer rate of 65536 bytes/s"),
            std::string::npos)
      << got.error().message;
  EXPECT_LT(seconds_since(start), 3.0);
}

TEST(HostileProvider, DeadlineEndsADripThatKeepsTheRate) {
  HostileOptions o;
  o.drip_every = milliseconds(20);
  HostileProvider provider(o);
  ClientConfig config = plain_config(provider.port());
  config.min_transfer_rate = 0;  // only the deadline can end it
  config.deadline = Clock::now() + milliseconds(1500);
  auto client = Client::connect(config);
  ASSERT_TRUE(client.ok()) << client.error().message;
  SnapshotRequest request;
  const auto start = Clock::now();
  auto got = client->fetch_container(request);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, Errc::kRejected);
  EXPECT_NE(got.error().message.find("the verifier's deadline passed"), std::string::npos)
      << got.error().message;
  EXPECT_LT(seconds_since(start), 2.5);
  // Past the deadline every call is refused at once, as the provider's fault.
  auto task = client->get_task();
  ASSERT_FALSE(task.ok());
  EXPECT_EQ(task.error().code, Errc::kRejected);
}

}  // namespace
}  // namespace vt::testing
