#include "stoker/io/body_buffers.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

namespace stoker::io {
namespace {

TEST(BodyBuffersTest, TakeGivesRoomAndReusesWhatWasGiven) {
  BodyBuffers pool(64 << 20);
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    const size_t size = std::uniform_int_distribution<size_t>(1, 3 << 20)(rng);
    Body b = pool.Take(size);
    EXPECT_TRUE(b.empty());
    EXPECT_GE(b.capacity(), size);
    EXPECT_LE(static_cast<double>(b.capacity()), size * 1.25 + 4096);
    // Cache-line aligned, new or kept: the socket copies and streaming stores want it.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kBodyAlignment, 0u) << size;
  }
  // A buffer given back is the one the next Take of a similar size gets, empty.
  Body b = pool.Take(300000);
  b.assign(300000, 0xAB);
  const uint8_t* memory = b.data();
  const auto capacity = static_cast<int64_t>(b.capacity());
  pool.Give(std::move(b));
  EXPECT_EQ(pool.kept_bytes(), capacity);
  Body again = pool.Take(290000);
  EXPECT_EQ(again.data(), memory);
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(pool.kept_bytes(), 0);
  // A much smaller ask does not take it (it would waste most of it).
  pool.Give(std::move(again));
  Body small = pool.Take(100000);
  EXPECT_NE(small.data(), memory);
  // Growing a Body keeps what it holds and the new storage's alignment.
  small.assign({1, 2, 3});
  small.resize(200000);
  small.shrink_to_fit();
  EXPECT_EQ(small[0] + small[1] + small[2], 6);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % kBodyAlignment, 0u);
  // Too small to keep: freed.
  Body tiny(100);
  pool.Give(std::move(tiny));
  EXPECT_EQ(pool.kept_bytes(), capacity);  // only the 300000-byte buffer
}

TEST(BodyBuffersTest, KeepsNoMoreThanItsBound) {
  BodyBuffers pool(4 << 20);
  std::vector<Body> taken;
  for (int i = 0; i < 40; ++i) taken.push_back(pool.Take(500000));
  for (auto& b : taken) pool.Give(std::move(b));
  EXPECT_LE(pool.kept_bytes(), 4 << 20);
  EXPECT_GT(pool.kept_bytes(), 3 << 20);
  // A buffer over a quarter of the bound is never kept.
  Body huge = pool.Take(2 << 20);
  const int64_t before = pool.kept_bytes();
  pool.Give(std::move(huge));
  EXPECT_EQ(pool.kept_bytes(), before);
}

TEST(BodyBuffersTest, ThreadsTakeAndGiveConcurrently) {
  BodyBuffers pool(16 << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 2000; ++i) {
        const size_t size = std::uniform_int_distribution<size_t>(20000, 600000)(rng);
        Body b = pool.Take(size);
        ASSERT_GE(b.capacity(), size);
        b.resize(size, static_cast<uint8_t>(t));
        ASSERT_EQ(b[size - 1], static_cast<uint8_t>(t));
        pool.Give(std::move(b));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(pool.kept_bytes(), 16 << 20);
}

}  // namespace
}  // namespace stoker::io
