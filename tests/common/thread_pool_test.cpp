#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>

namespace vt {
namespace {

TEST(ThreadPool, ParallelForVisitsEachIndexOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> seen(1000);
  pool.parallel_for(seen.size(), [&](std::size_t i) { seen[i]++; });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

TEST(ThreadPool, SubmitReturnsValueAndErrorsPropagate) {
  ThreadPool pool(2);
  EXPECT_EQ(pool.submit([] { return 7; }).get(), 7);
  EXPECT_THROW(pool.parallel_for(10, [](std::size_t i) {
    if (i == 5) throw std::runtime_error("boom");
  }), std::runtime_error);
}

// The provider's commit pipeline runs on background workers (issue 20): they, and only they,
// sit at nice 19, and the thread that made the pool keeps its priority.
TEST(ThreadPool, BackgroundWorkersRunAtTheLowestPriority) {
  auto nice_here = [] { return ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid))); };
  const int mine = nice_here();
  ThreadPool background(1, /*background=*/true);
  ThreadPool normal(1);
  EXPECT_EQ(background.submit(nice_here).get(), 19);
  EXPECT_EQ(normal.submit(nice_here).get(), mine);
  EXPECT_EQ(nice_here(), mine);
}

}  // namespace
}  // namespace vt
