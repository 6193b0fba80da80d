#include "stoker/core/buffer_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

namespace stoker {
namespace {

TEST(BufferPoolTest, SizeClassesWasteAtMostAQuarter) {
  EXPECT_EQ(BufferPool::SizeClass(1), BufferPool::kMinCapacity);
  EXPECT_EQ(BufferPool::SizeClass(4096), 4096u);
  for (size_t size : {4097u, 5000u, 65536u, 65537u, 1000000u, 12345678u}) {
    const size_t cls = BufferPool::SizeClass(size);
    EXPECT_GE(cls, size);
    EXPECT_LE(cls, size + size / 4 + 1) << size;
    EXPECT_EQ(BufferPool::SizeClass(cls), cls) << "classes are fixed points";
  }
}

TEST(BufferPoolTest, ReturnedBuffersAreReused) {
  auto pool = BufferPool::Make(1 << 20);
  uint8_t* first = nullptr;
  {
    Result<Buffer> b = pool->Acquire(10000);
    ASSERT_TRUE(b.ok());
    first = b->data();
    EXPECT_EQ(b->size(), 10000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % BufferPool::kAlignment, 0u);
    std::memset(first, 7, b->size());  // writable over its whole size
    EXPECT_EQ(pool->stats().outstanding_bytes, static_cast<int64_t>(b->capacity()));
  }
  EXPECT_EQ(pool->stats().outstanding_bytes, 0);
  Result<Buffer> again = pool->Acquire(9000);  // same size class
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(pool->stats().reused, 1);
}

TEST(BufferPoolTest, CacheIsBounded) {
  auto pool = BufferPool::Make(8192);
  {
    std::vector<Buffer> buffers;
    for (int i = 0; i < 4; ++i) buffers.push_back(*pool->Acquire(4096));
  }
  EXPECT_EQ(pool->stats().cached_bytes, 8192);
}

TEST(BufferPoolTest, BufferOutlivesCallersPoolHandle) {
  Buffer buffer;
  {
    auto pool = BufferPool::Make(1 << 20);
    buffer = *pool->Acquire(100);
  }
  std::memset(buffer.data(), 1, buffer.size());  // still valid: the buffer keeps the pool
  buffer = Buffer();
  EXPECT_TRUE(buffer.empty());
}

TEST(BufferPoolTest, ConcurrentAcquireRelease) {
  auto pool = BufferPool::Make(1 << 22);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        Result<Buffer> b = pool->Acquire(4096 * (1 + (i + t) % 5));
        ASSERT_TRUE(b.ok());
        b->data()[0] = static_cast<uint8_t>(i);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(pool->stats().outstanding_bytes, 0);
  EXPECT_EQ(pool->stats().acquired, 8000);
}

}  // namespace
}  // namespace stoker
