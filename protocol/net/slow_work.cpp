#include "protocol/net/slow_work.h"

#include <sys/resource.h>
#include <unistd.h>

namespace vt {

namespace {

// Below the I/O threads, which answer every client: an encode may take all the CPU it can get,
// but not at the cost of a get_task. Linux applies a nice value to the calling thread alone.
constexpr int kNice = 10;

}  // namespace

SlowWork::SlowWork(std::size_t threads) {
  for (std::size_t i = 0; i < std::max<std::size_t>(1, threads); ++i) {
    threads_.emplace_back([this] {
      ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kNice);
      work();
    });
  }
}

SlowWork::~SlowWork() { stop(); }

void SlowWork::submit(const std::string& address, std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    auto& queue = queues_[address];
    if (queue.empty() && !running_.count(address)) turns_.push_back(address);
    queue.push_back(std::move(job));
  }
  wake_.notify_one();
}

void SlowWork::work() {
  for (;;) {
    std::function<void()> job;
    std::string address;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopped_ || !turns_.empty(); });
      if (stopped_) return;
      address = std::move(turns_.front());
      turns_.pop_front();
      auto queue = queues_.find(address);
      job = std::move(queue->second.front());
      queue->second.pop_front();
      if (queue->second.empty()) queues_.erase(queue);
      running_.insert(address);
    }
    job();
    job = nullptr;  // what the job holds goes before the next one starts
    bool more = false;
    {
      std::lock_guard lock(mutex_);
      running_.erase(address);
      // Its next job waits for the turns of the addresses queued meanwhile.
      if (!stopped_ && queues_.count(address)) {
        turns_.push_back(std::move(address));
        more = true;
      }
    }
    if (more) wake_.notify_one();
  }
}

void SlowWork::stop() {
  std::map<std::string, std::deque<std::function<void()>>> dropped;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
    dropped.swap(queues_);
    turns_.clear();
    running_.clear();
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace vt
