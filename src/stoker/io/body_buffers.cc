#include "stoker/io/body_buffers.h"

#include "stoker/core/buffer_pool.h"

namespace stoker::io {

Body BodyBuffers::Take(size_t size) {
  Body buffer;
  if (size < kMinKept || static_cast<int64_t>(size) > max_bytes_ / 4) {
    buffer.reserve(size);
    return buffer;
  }
  const size_t capacity = BufferPool::SizeClass(size);
  {
    std::lock_guard lock(mutex_);
    // The smallest kept buffer that fits, unless it would waste over half of itself.
    auto it = by_capacity_.lower_bound(capacity);
    while (it != by_capacity_.end() && it->second.empty() && it->first <= 2 * size) ++it;
    if (it != by_capacity_.end() && it->first <= 2 * size && !it->second.empty()) {
      buffer = std::move(it->second.back());
      it->second.pop_back();
      kept_bytes_ -= static_cast<int64_t>(buffer.capacity());
      return buffer;  // empty: Give cleared it
    }
  }
  buffer.reserve(capacity);
  return buffer;
}

void BodyBuffers::Give(Body buffer) {
  const size_t capacity = buffer.capacity();
  if (capacity < kMinKept || static_cast<int64_t>(capacity) > max_bytes_ / 4) return;
  buffer.clear();
  std::lock_guard lock(mutex_);
  if (kept_bytes_ + static_cast<int64_t>(capacity) > max_bytes_) return;  // freed
  by_capacity_[capacity].push_back(std::move(buffer));
  kept_bytes_ += static_cast<int64_t>(capacity);
}

int64_t BodyBuffers::kept_bytes() const {
  std::lock_guard lock(mutex_);
  return kept_bytes_;
}

}  // namespace stoker::io
