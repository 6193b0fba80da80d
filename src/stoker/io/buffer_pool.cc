#include "stoker/io/buffer_pool.h"

#include <algorithm>

namespace stoker::io {

size_t BufferPool::ClassCapacity(int k) {
  // 2^(k/4): the power of two times 2^0, 2^0.25, 2^0.5 or 2^0.75 (in 4096ths).
  static constexpr uint64_t kSteps[4] = {4096, 4871, 5793, 6889};
  const uint64_t exact = (uint64_t{1} << (k / 4)) * kSteps[k % 4] / 4096;
  constexpr uint64_t kPage = 4096;
  return static_cast<size_t>((exact + kPage - 1) / kPage * kPage);
}

int BufferPool::ClassAtLeast(size_t size) {
  const int log2 = 63 - __builtin_clzll(static_cast<unsigned long long>(size | 1));
  int k = std::max(0, 4 * log2 - 4);
  while (k < kClasses - 1 && ClassCapacity(k) < size) ++k;
  return k;
}

int BufferPool::ClassAtMost(size_t capacity) {
  const int log2 = 63 - __builtin_clzll(static_cast<unsigned long long>(capacity | 1));
  int k = std::min(kClasses - 1, 4 * log2 + 4);
  while (k > 0 && ClassCapacity(k) > capacity) --k;
  return k;
}

std::vector<uint8_t> BufferPool::Take(size_t size) {
  std::vector<uint8_t> buffer;
  if (size < kMinPooled || static_cast<int64_t>(size) > max_bytes_ / 4) {
    buffer.reserve(size);
    return buffer;
  }
  const int k = ClassAtLeast(size);
  {
    std::lock_guard lock(mutex_);
    // A buffer from class j >= k holds at least ClassCapacity(k) >= size bytes; more
    // than four classes up (over twice the size) would waste too much.
    for (int j = k; j < std::min(k + 5, kClasses); ++j) {
      if (classes_[j].empty()) continue;
      buffer = std::move(classes_[j].back());
      classes_[j].pop_back();
      pooled_bytes_ -= static_cast<int64_t>(buffer.capacity());
      return buffer;  // empty: Give cleared it
    }
  }
  buffer.reserve(ClassCapacity(k));
  return buffer;
}

void BufferPool::Give(std::vector<uint8_t> buffer) {
  const size_t capacity = buffer.capacity();
  if (capacity < kMinPooled || static_cast<int64_t>(capacity) > max_bytes_ / 4) return;
  buffer.clear();
  const int k = ClassAtMost(capacity);
  std::lock_guard lock(mutex_);
  if (pooled_bytes_ + static_cast<int64_t>(capacity) > max_bytes_) return;  // freed
  classes_[k].push_back(std::move(buffer));
  pooled_bytes_ += static_cast<int64_t>(capacity);
}

int64_t BufferPool::pooled_bytes() const {
  std::lock_guard lock(mutex_);
  return pooled_bytes_;
}

}  // namespace stoker::io
