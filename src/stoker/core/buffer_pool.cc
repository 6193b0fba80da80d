#include "stoker/core/buffer_pool.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <new>

namespace stoker {

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    pool_ = std::move(other.pool_);
  }
  return *this;
}

void Buffer::Release() {
  if (data_ != nullptr) {
    pool_->Return(data_, capacity_);
    data_ = nullptr;
    size_ = capacity_ = 0;
    pool_.reset();
  }
}

std::shared_ptr<BufferPool> BufferPool::Make(size_t max_cached_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_cached_bytes));
}

BufferPool::~BufferPool() {
  // No buffer can be out: each holds a reference to the pool.
  for (auto& [capacity, list] : free_lists_) {
    for (uint8_t* p : list) std::free(p);
  }
}

size_t BufferPool::SizeClass(size_t size) {
  if (size <= kMinCapacity) return kMinCapacity;
  // Four classes per power of two: round up to a multiple of 2^(floor(log2(size)) - 2).
  const int top_bit = std::bit_width(size - 1) - 1;
  const size_t step = size_t{1} << (top_bit - 2);
  return (size + step - 1) / step * step;
}

Result<Buffer> BufferPool::Acquire(size_t size) {
  const size_t capacity = SizeClass(size);
  uint8_t* data = nullptr;
  {
    std::lock_guard lock(mutex_);
    for (auto& [cls, list] : free_lists_) {
      if (cls == capacity && !list.empty()) {
        data = list.back();
        list.pop_back();
        stats_.cached_bytes -= static_cast<int64_t>(capacity);
        ++stats_.reused;
        break;
      }
    }
    ++stats_.acquired;
    stats_.outstanding_bytes += static_cast<int64_t>(capacity);
  }
  if (data == nullptr) {
    data = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, capacity));
    if (data == nullptr) {
      std::lock_guard lock(mutex_);
      --stats_.acquired;
      stats_.outstanding_bytes -= static_cast<int64_t>(capacity);
      return status::LimitExceeded("out of memory allocating ", std::to_string(capacity),
                                   " bytes");
    }
  }
  Buffer buffer;
  buffer.data_ = data;
  buffer.size_ = size;
  buffer.capacity_ = capacity;
  buffer.pool_ = shared_from_this();
  return buffer;
}

void BufferPool::Return(uint8_t* data, size_t capacity) {
  {
    std::lock_guard lock(mutex_);
    stats_.outstanding_bytes -= static_cast<int64_t>(capacity);
    if (stats_.cached_bytes + static_cast<int64_t>(capacity) <=
        static_cast<int64_t>(max_cached_bytes_)) {
      auto it = std::find_if(free_lists_.begin(), free_lists_.end(),
                             [&](const auto& entry) { return entry.first == capacity; });
      if (it == free_lists_.end()) {
        free_lists_.emplace_back(capacity, std::vector<uint8_t*>{});
        it = std::prev(free_lists_.end());
      }
      it->second.push_back(data);
      stats_.cached_bytes += static_cast<int64_t>(capacity);
      return;
    }
  }
  std::free(data);
}

BufferPoolStats BufferPool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace stoker
