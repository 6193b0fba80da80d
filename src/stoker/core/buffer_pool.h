// BufferPool: reusable, aligned byte buffers for decoded pixels and batch tensors.
//
// Decoders and kernels write into a Buffer taken from the pool; when the last owner
// (a batch, or a tensor handed to Python) lets go, the memory returns to the pool and
// the next image of a similar size reuses it instead of calling the allocator.
//
// Sizes are rounded up to a size class (four classes per power of two, so at most 25%
// is wasted). The pool keeps at most `max_cached_bytes` of idle memory; beyond that a
// returned buffer is freed. Thread-safe: Acquire and release take one short lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "stoker/core/status.h"

namespace stoker {

class BufferPool;

// A move-only owner of pooled memory. Returns itself to its pool when destroyed.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Release(); }

  uint8_t* data() const { return data_; }
  // The size the caller asked for; capacity() >= size().
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return data_ == nullptr; }

 private:
  friend class BufferPool;
  void Release();

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  // Keeps the pool alive while any of its buffers is out (e.g. held by Python).
  std::shared_ptr<BufferPool> pool_;
};

struct BufferPoolStats {
  int64_t acquired = 0;        // Acquire calls that succeeded
  int64_t reused = 0;          // ... of which were served from the cache
  int64_t cached_bytes = 0;    // idle memory held now
  int64_t outstanding_bytes = 0;  // capacity of buffers handed out and not yet returned
};

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Memory is aligned to this many bytes (a cache line; enough for any SIMD width).
  static constexpr size_t kAlignment = 64;
  // Requests are rounded up to at least this many bytes.
  static constexpr size_t kMinCapacity = 4096;

  static std::shared_ptr<BufferPool> Make(size_t max_cached_bytes);
  ~BufferPool();

  // Returns a buffer of at least `size` bytes (contents unspecified). Fails with
  // LimitExceeded only if the system allocator fails.
  Result<Buffer> Acquire(size_t size);

  BufferPoolStats stats() const;

  // The capacity Acquire(size) would hand out; exposed for tests.
  static size_t SizeClass(size_t size);

 private:
  explicit BufferPool(size_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {}
  friend class Buffer;
  void Return(uint8_t* data, size_t capacity);

  const size_t max_cached_bytes_;
  mutable std::mutex mutex_;
  // Guarded by mutex_: idle buffers by capacity, unsorted within a class.
  std::vector<std::pair<size_t, std::vector<uint8_t*>>> free_lists_;
  BufferPoolStats stats_;  // guarded by mutex_
};

}  // namespace stoker
