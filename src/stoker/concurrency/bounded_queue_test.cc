#include "stoker/concurrency/bounded_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace stoker {
namespace {

TEST(BoundedQueueTest, FifoAndTryPushRespectsCapacity) {
  BoundedQueue<int> q(2);
  EXPECT_TRUE(q.TryPush(1));
  EXPECT_TRUE(q.TryPush(2));
  EXPECT_FALSE(q.TryPush(3));
  EXPECT_EQ(*q.Pop(), 1);
  EXPECT_EQ(*q.Pop(), 2);
}

TEST(BoundedQueueTest, PushFrontJumpsTheQueueAndIgnoresCapacity) {
  BoundedQueue<int> q(2);
  EXPECT_TRUE(q.TryPush(1));
  EXPECT_TRUE(q.TryPush(2));
  EXPECT_TRUE(q.PushFront(0));  // full, yet accepted: it never blocks
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(*q.Pop(), 0);
  EXPECT_EQ(*q.Pop(), 1);
  q.Close();
  EXPECT_FALSE(q.PushFront(5));
}

TEST(BoundedQueueTest, PushBlocksWhileFull) {
  BoundedQueue<int> q(1);
  ASSERT_TRUE(q.Push(1));
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    q.Push(2);
    pushed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(pushed.load());
  EXPECT_EQ(*q.Pop(), 1);
  producer.join();
  EXPECT_TRUE(pushed.load());
  EXPECT_EQ(*q.Pop(), 2);
}

// With a refill mark, a producer blocked on a full queue stays blocked until pops
// bring the queue down to the mark, then pushes.
TEST(BoundedQueueTest, BlockedProducerWaitsForTheRefillMark) {
  BoundedQueue<int> q(4, 2);
  EXPECT_EQ(q.refill_at(), 2u);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.Push(i));
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    q.Push(4);
    pushed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(*q.Pop(), 0);  // 3 left: above the mark, the producer sleeps on
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(pushed.load());
  EXPECT_EQ(*q.Pop(), 1);  // 2 left: at the mark
  producer.join();
  EXPECT_TRUE(pushed.load());
  for (int want = 2; want <= 4; ++want) EXPECT_EQ(*q.Pop(), want);
  EXPECT_EQ(BoundedQueue<int>(4, 9).refill_at(), 3u);  // clamped below the capacity
}

TEST(BoundedQueueTest, CloseDrainsThenEnds) {
  BoundedQueue<int> q(4);
  q.Push(1);
  q.Close();
  EXPECT_FALSE(q.Push(2));
  EXPECT_EQ(*q.Pop(), 1);
  EXPECT_FALSE(q.Pop().has_value());
}

TEST(BoundedQueueTest, CloseWakesBlockedConsumerAndCancelDrops) {
  BoundedQueue<int> q(4);
  std::thread consumer([&] { EXPECT_FALSE(q.Pop().has_value()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  q.Close();
  consumer.join();

  BoundedQueue<int> q2(4);
  q2.Push(1);
  q2.Cancel();
  EXPECT_FALSE(q2.Pop().has_value());
  EXPECT_EQ(q2.size(), 0u);
}

TEST(BoundedQueueTest, ManyProducersManyConsumersLoseNothing) {
  BoundedQueue<int> q(8);
  constexpr int kPerProducer = 5000;
  std::atomic<long> sum{0};
  std::atomic<int> count{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < 3; ++p) {
    threads.emplace_back([&] {
      for (int i = 1; i <= kPerProducer; ++i) q.Push(i);
    });
  }
  std::vector<std::thread> consumers;
  for (int c = 0; c < 3; ++c) {
    consumers.emplace_back([&] {
      while (auto v = q.Pop()) {
        sum += *v;
        ++count;
      }
    });
  }
  for (auto& t : threads) t.join();
  q.Close();
  for (auto& t : consumers) t.join();
  EXPECT_EQ(count.load(), 3 * kPerProducer);
  EXPECT_EQ(sum.load(), 3L * kPerProducer * (kPerProducer + 1) / 2);
}

}  // namespace
}  // namespace stoker
