#pragma once
// Internal to protocol/: the server's threads for catalog calls that may read, decode or code a
// whole snapshot (docs/protocol.md, "Under abuse"). The I/O threads only wait for them, so a
// client whose requests are expensive delays its own answers, not everyone's get_task.
//
// Jobs queue per peer address and the addresses take turns: a peer's backlog delays another
// peer's job by at most one job per address ahead of it. An address has at most one job running
// at a time, however many connections it opens (a session has one job at a time; an address as
// many as it has connections): expensive requests from one client machine take at most one
// thread, so they cannot take every core from the I/O threads that answer everyone else. The
// threads run at a lower CPU priority than the I/O threads, so on a machine with few cores a busy
// encoder still leaves them the time to answer.

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace vt {

class SlowWork {
 public:
  explicit SlowWork(std::size_t threads);
  ~SlowWork();  // stop()
  SlowWork(const SlowWork&) = delete;
  SlowWork& operator=(const SlowWork&) = delete;

  // Runs `job` on one of the threads, in turn with the other addresses' jobs. After stop() the
  // job is destroyed without running.
  void submit(const std::string& address, std::function<void()> job);

  // Destroys the queued jobs and waits for the running ones to return.
  void stop();

 private:
  void work();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopped_ = false;                                             // GUARDED_BY(mutex_)
  std::map<std::string, std::deque<std::function<void()>>> queues_;  // GUARDED_BY(mutex_)
  // GUARDED_BY(mutex_): addresses with a queued job and none running, in turn.
  std::deque<std::string> turns_;
  std::set<std::string> running_;  // GUARDED_BY(mutex_): addresses with a job running
  std::vector<std::thread> threads_;
};

}  // namespace vt
