#include "common/thread_pool.h"

#include <gtest/gtest.h>

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
  EXPECT_THROW(pool.parallel_for(10,
                                 [](std::size_t i) {
                                   if (i == 5) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
}

}  // namespace
}  // namespace vt
