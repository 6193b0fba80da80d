#include "stoker/pipeline/in_order_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

namespace stoker {
namespace {

using namespace std::chrono_literals;
using Queue = InOrderQueue<int>;

TEST(InOrderQueueTest, DeliversInSequenceWhateverThePutOrder) {
  Queue q(8);
  std::vector<int> order(8);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(42));
  for (int seq : order) {
    ASSERT_TRUE(q.WaitAdmit(seq));
    q.Put(seq, seq * 10);
  }
  for (int expect = 0; expect < 8; ++expect) {
    int item = -1;
    ASSERT_EQ(q.Next(1s, &item), Queue::NextResult::kItem);
    EXPECT_EQ(item, expect * 10);
  }
}

TEST(InOrderQueueTest, NextWaitsForTheMissingItem) {
  Queue q(4);
  q.Put(1, 1);
  int item = -1;
  EXPECT_EQ(q.Next(20ms, &item), Queue::NextResult::kTimeout);
  q.Put(0, 0);
  ASSERT_EQ(q.Next(1s, &item), Queue::NextResult::kItem);
  EXPECT_EQ(item, 0);
  ASSERT_EQ(q.Next(1s, &item), Queue::NextResult::kItem);
  EXPECT_EQ(item, 1);
}

// Admission: with depth d, item k may start once k < (Next calls made) + d.
void ExpectAdmitted(Queue& q, int64_t seq, bool admitted) {
  std::atomic<bool> done{false};
  std::thread t([&] {
    q.WaitAdmit(seq);
    done = true;
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(done.load(), admitted) << "seq " << seq;
  if (!admitted) {
    q.Close();  // release the thread
  }
  t.join();
}

TEST(InOrderQueueTest, PrefetchZeroStartsWorkOnlyWhenAsked) {
  Queue q(0);
  ExpectAdmitted(q, 0, false);
  Queue q2(0);
  int item;
  EXPECT_EQ(q2.Next(1ms, &item), Queue::NextResult::kTimeout);  // asks for item 0
  ExpectAdmitted(q2, 0, true);
  ExpectAdmitted(q2, 1, false);
}

TEST(InOrderQueueTest, PrefetchDepthBoundsWorkAhead) {
  Queue q(3);
  ExpectAdmitted(q, 2, true);
  Queue q2(3);
  ExpectAdmitted(q2, 3, false);
  Queue q3(3);
  int item;
  EXPECT_EQ(q3.Next(1ms, &item), Queue::NextResult::kTimeout);
  ExpectAdmitted(q3, 3, true);  // one requested + 3 ahead
  ExpectAdmitted(q3, 4, false);
}

TEST(InOrderQueueTest, CloseWakesConsumerAndProducer) {
  Queue q(1);
  std::thread consumer([&] {
    int item;
    EXPECT_EQ(q.Next(10s, &item), Queue::NextResult::kClosed);
  });
  std::thread producer([&] { EXPECT_FALSE(q.WaitAdmit(100)); });
  std::this_thread::sleep_for(20ms);
  q.Close();
  consumer.join();
  producer.join();
}

TEST(InOrderQueueTest, ConcurrentProducersConsumerSeesOrder) {
  constexpr int kItems = 2000;
  Queue q(6);
  std::atomic<int> next_seq{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < 4; ++p) {
    producers.emplace_back([&] {
      while (true) {
        const int seq = next_seq.fetch_add(1);
        if (seq >= kItems) return;
        if (!q.WaitAdmit(seq)) return;
        if (seq % 7 == 0) std::this_thread::yield();
        q.Put(seq, seq);
      }
    });
  }
  for (int expect = 0; expect < kItems; ++expect) {
    int item = -1;
    ASSERT_EQ(q.Next(10s, &item), Queue::NextResult::kItem);
    ASSERT_EQ(item, expect);
    ASSERT_LE(q.ready_count(), 7u);
  }
  for (auto& t : producers) t.join();
}

}  // namespace
}  // namespace stoker
