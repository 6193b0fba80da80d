// A bounded pool of byte buffers for object bodies.
//
// Every remote read fills a fresh vector of up to hundreds of KB. Left to malloc, such
// buffers come and go as fresh pages (mmap, or a heap that grows and is trimmed back),
// and at hundreds of MB/s the page faults and the kernel zeroing the pages cost more
// CPU than receiving the bytes. Consumers that are done with a body hand its buffer
// back (ObjectStore::Recycle); the next read of a similar size takes it, so the memory
// stays mapped and warm.
//
// Buffers are kept in size classes a quarter of a power of two apart (at most 19 %
// larger than asked for), and the pool holds at most `max_bytes` of capacity: what is
// given back beyond that is freed. Thread-safe; every call is a short critical section.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace stoker::io {

class BufferPool {
 public:
  explicit BufferPool(int64_t max_bytes) : max_bytes_(max_bytes) {}
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // An empty buffer with capacity for at least `size` bytes: a pooled one when one of
  // a close size is there, else a new one of the size class's capacity.
  std::vector<uint8_t> Take(size_t size);
  // Keeps `buffer`'s memory for a later Take, or frees it when the pool is full or the
  // buffer is too small or too large to be worth keeping.
  void Give(std::vector<uint8_t> buffer);

  int64_t pooled_bytes() const;
  // Size classes: the capacity of class k is about 2^(k/4) bytes (page multiples).
  static constexpr size_t kMinPooled = size_t{16} << 10;
  static size_t ClassCapacity(int k);

 private:
  static constexpr int kClasses = 4 * 40;  // up to 2^40 bytes
  static int ClassAtLeast(size_t size);    // smallest k with ClassCapacity(k) >= size
  static int ClassAtMost(size_t capacity);  // largest k with ClassCapacity(k) <= capacity

  const int64_t max_bytes_;
  mutable std::mutex mutex_;
  std::vector<std::vector<uint8_t>> classes_[kClasses];  // guarded by mutex_
  int64_t pooled_bytes_ = 0;                             // guarded by mutex_
};

}  // namespace stoker::io
