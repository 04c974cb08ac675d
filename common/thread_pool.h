#pragma once
// A fixed set of worker threads for coarse, independent jobs: hashing chunks, coding sections,
// the provider's commit pipeline. Work is never split finer than the caller asks.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace vt {

class ThreadPool {
 public:
  // threads == 0 means one per hardware thread.
  explicit ThreadPool(std::size_t threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  std::size_t size() const { return workers_.size(); }

  template <typename F>
  auto submit(F&& fn) -> std::future<decltype(fn())> {
    using R = decltype(fn());
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
    std::future<R> result = task->get_future();
    enqueue([task] { (*task)(); });
    return result;
  }

  // Runs fn(i) for i in [0, n) on the workers and the calling thread; returns when all are done.
  void parallel_for(std::size_t n, const std::function<void(std::size_t)>& fn);

 private:
  void enqueue(std::function<void()> job);
  void run_worker();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // GUARDED_BY(mutex_)
  bool stopping_ = false;                   // GUARDED_BY(mutex_)
  std::vector<std::thread> workers_;
};

std::size_t hardware_threads();

}  // namespace vt
