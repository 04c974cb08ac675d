// Requests that read or code a whole snapshot run on the server's slow-work threads, not on the
// I/O threads every client waits on (docs/protocol.md, "Under abuse"); their queue gives each
// peer address its turn. bench_flood measures the latencies (docs/benchmarks.md).

#include <atomic>
#include <condition_variable>
#include <thread>

#include "protocol/net/slow_work.h"
#include "tests/protocol/server_fixture.h"

namespace vt::testing {
namespace {

using std::chrono::milliseconds;

// A door a thread waits at until the test opens it.
class Door {
 public:
  // Blocks until open(); tells waiting_for_someone() that a caller arrived.
  void pass() {
    std::unique_lock lock(mutex_);
    ++arrived_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
  }
  bool someone_waits(milliseconds within) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, within, [&] { return arrived_ > 0; });
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  bool open_ = false;
};

// The fixture's catalog, except that coding a container waits at a door: an encode that takes
// as long as the test wants.
class SlowCatalog : public MemoryCatalog {
 public:
  using MemoryCatalog::MemoryCatalog;
  Result<std::shared_ptr<const Bytes>> container(const ContainerRequest& request) override {
    door.pass();
    return MemoryCatalog::container(request);
  }
  Door door;
};

class SlowWorkTest : public ServerFixture {
 protected:
  std::shared_ptr<MemoryCatalog> make_catalog() override {
    slow_ = std::make_shared<SlowCatalog>(kFloats);
    return slow_;
  }
  ServerConfig configure() override {
    ServerConfig config = ServerFixture::configure();
    config.threads = 1;  // one I/O thread: whatever blocks it blocks every client
    return config;
  }
  std::shared_ptr<SlowCatalog> slow_;
};

TEST_F(SlowWorkTest, AnEncodeUnderWayDoesNotHoldTheIoThreads) {
  std::thread downloader([&] {
    Client client = connect();
    SnapshotRequest r = request(2, comp::Codec::kDelta);
    r.base_root = catalog_->root(0);
    EXPECT_TRUE(client.fetch_container(r).ok());
  });
  ASSERT_TRUE(slow_->door.someone_waits(milliseconds(10'000)));
  // The encode is under way (held at the door). Another client connects and is answered.
  ClientConfig config = client_config();
  config.connect_timeout = milliseconds(3'000);
  config.io_timeout = milliseconds(3'000);
  auto other = Client::connect(config);
  auto task = other ? other->get_task() : Result<Bytes>(other.error());
  slow_->door.open();
  downloader.join();
  ASSERT_TRUE(task.ok()) << task.error().message;
  EXPECT_EQ(*task, catalog_->task_bytes());
}

TEST(SlowWork, AddressesTakeTurns) {
  SlowWork work(1);
  Door door;
  std::mutex mutex;
  std::vector<std::string> order;
  auto job = [&](std::string name) {
    return [&, name] {
      std::lock_guard lock(mutex);
      order.push_back(name);
    };
  };
  work.submit("10.0.0.1", [&] { door.pass(); });  // holds the one thread
  ASSERT_TRUE(door.someone_waits(milliseconds(10'000)));
  for (int i = 0; i < 4; ++i) work.submit("10.0.0.1", job("a" + std::to_string(i)));
  work.submit("10.0.0.2", job("b0"));
  work.submit("10.0.0.2", job("b1"));
  door.open();
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard lock(mutex);
      if (order.size() == 6) break;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  work.stop();
  // 10.0.0.2 waits for one job of 10.0.0.1 at a time, not for its whole backlog; and having
  // waited while 10.0.0.1's first job ran, it goes first.
  EXPECT_EQ(order, (std::vector<std::string>{"b0", "a0", "b1", "a1", "a2", "a3"}));
}

// One client machine's expensive requests take one thread at a time, however many connections it
// opens: with two threads, a second job of the same address waits while another address's runs.
TEST(SlowWork, AnAddressRunsOneJobAtATime) {
  SlowWork work(2);
  Door first;
  std::atomic<bool> second_ran{false}, other_ran{false};
  work.submit("10.0.0.1", [&] { first.pass(); });
  ASSERT_TRUE(first.someone_waits(milliseconds(10'000)));
  work.submit("10.0.0.1", [&] { second_ran = true; });
  work.submit("10.0.0.2", [&] { other_ran = true; });
  for (int i = 0; i < 500 && !other_ran; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(other_ran);
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(second_ran) << "a second job of 10.0.0.1 ran beside its first";
  first.open();
  for (int i = 0; i < 500 && !second_ran; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(second_ran);
  work.stop();
}

TEST(SlowWork, StopDestroysQueuedJobsWithoutRunningThem) {
  SlowWork work(1);
  Door door;
  std::atomic<int> ran{0};
  auto held = std::make_shared<int>(0);
  work.submit("10.0.0.1", [&] { door.pass(); });
  ASSERT_TRUE(door.someone_waits(milliseconds(10'000)));
  work.submit("10.0.0.1", [&ran, held] { ++ran; });
  std::weak_ptr<int> watch = held;
  held.reset();
  std::thread stopper([&] { work.stop(); });
  // stop() marks the queue stopped at once and then waits for the running job; the door opens
  // well after that, so a job that ran now would have been started by a stopped queue.
  std::this_thread::sleep_for(milliseconds(200));
  door.open();
  stopper.join();
  EXPECT_EQ(ran, 0);
  EXPECT_TRUE(watch.expired());  // destroyed with the queue
}

}  // namespace
}  // namespace vt::testing
