#include "stoker/concurrency/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace stoker {
namespace {

TEST(ThreadPoolTest, RejectsZeroThreads) {
  EXPECT_EQ(ThreadPool::Make(0, 4).status().code(), StatusCode::kInvalidArgument);
}

TEST(ThreadPoolTest, RunsEveryTaskOnAValidWorker) {
  auto pool = *ThreadPool::Make(3, 2);
  std::atomic<int> done{0};
  std::mutex mutex;
  std::set<int> workers;
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(pool->Submit([&](int worker) {
                      {
                        std::lock_guard lock(mutex);
                        workers.insert(worker);
                      }
                      ++done;
                    })
                    .ok());
  }
  while (done.load() < 500) std::this_thread::yield();
  for (int w : workers) {
    EXPECT_GE(w, 0);
    EXPECT_LT(w, 3);
  }
}

TEST(ThreadPoolTest, SubmitFirstFromAWorkerNeverDeadlocksOnAFullQueue) {
  // One worker, a queue of one: a task that submits follow-up work with Submit would
  // block forever on the full queue; SubmitFirst does not, and its task runs next.
  auto pool = *ThreadPool::Make(1, 1);
  std::atomic<bool> release{false};
  std::mutex mutex;
  std::vector<int> order;
  auto record = [&](int v) {
    std::lock_guard lock(mutex);
    order.push_back(v);
  };
  ASSERT_TRUE(pool->Submit([&](int) {
                    while (!release.load()) std::this_thread::yield();
                    record(1);
                    ASSERT_TRUE(pool->SubmitFirst([&](int) { record(2); }).ok());
                  })
                  .ok());
  ASSERT_TRUE(pool->Submit([&](int) { record(3); }).ok());  // fills the queue
  release = true;
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard lock(mutex);
      if (order.size() == 3) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::lock_guard lock(mutex);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(ThreadPoolTest, ShutdownDropsQueuedTasksAndJoins) {
  auto pool = *ThreadPool::Make(1, 16);
  std::atomic<bool> release{false};
  std::atomic<bool> started{false};
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool->Submit([&](int) {
                    started = true;
                    while (!release.load()) std::this_thread::yield();
                    ++ran;
                  })
                  .ok());
  while (!started.load()) std::this_thread::yield();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(pool->Submit([&](int) { ++ran; }).ok());
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    release = true;
  });
  pool->Shutdown();
  releaser.join();
  EXPECT_EQ(ran.load(), 1) << "the running task finishes; queued ones are dropped";
  EXPECT_EQ(pool->Submit([](int) {}).code(), StatusCode::kCancelled);
  pool->Shutdown();  // idempotent
}

}  // namespace
}  // namespace stoker
