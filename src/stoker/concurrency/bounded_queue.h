// BoundedQueue<T>: a blocking multi-producer multi-consumer FIFO with a capacity.
//
// Push blocks while the queue is full, Pop while it is empty; that is how a slow
// consumer pushes back on producers instead of letting memory grow. Close() wakes
// everyone: pushes fail from then on, pops drain what is left and then report the end.
// Cancel() is Close() plus dropping what is queued. Thread-safe.
//
// A producer blocked on a full queue is woken when pops bring the queue down to
// `refill_at` items (default capacity - 1: at the first pop). A lower mark lets it
// push several items per wake-up instead of trading one wake-up per item with the
// consumers, which on a busy pipeline costs more than the items' work.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace stoker {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity)
      : capacity_(capacity == 0 ? 1 : capacity), refill_at_(capacity_ - 1) {}
  // `refill_at` < capacity (clamped).
  BoundedQueue(size_t capacity, size_t refill_at)
      : capacity_(capacity == 0 ? 1 : capacity),
        refill_at_(refill_at < capacity_ ? refill_at : capacity_ - 1) {}

  // Blocks until there is room or the queue is closed. Returns false if closed (the
  // item is dropped).
  bool Push(T item) {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  // Never blocks. Returns false if full or closed.
  bool TryPush(T item) {
    std::lock_guard lock(mutex_);
    if (closed_ || items_.size() >= capacity_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  // Never blocks: puts `item` at the head, past the capacity. For work that must not
  // wait behind the queue (a continuation of work already admitted); the caller bounds
  // how many such items can exist. Returns false if closed.
  bool PushFront(T item) {
    std::lock_guard lock(mutex_);
    if (closed_) return false;
    items_.push_front(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  // Blocks until an item is available; nullopt once closed and drained.
  std::optional<T> Pop() {
    std::unique_lock lock(mutex_);
    not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    if (items_.size() <= refill_at_) not_full_.notify_all();
    return item;
  }

  void Close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  void Cancel() {
    std::deque<T> dropped;
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
      dropped.swap(items_);
      not_full_.notify_all();
      not_empty_.notify_all();
    }
    // `dropped` is destroyed outside the lock: an item's destructor may be arbitrary.
  }

  size_t size() const {
    std::lock_guard lock(mutex_);
    return items_.size();
  }
  size_t capacity() const { return capacity_; }
  size_t refill_at() const { return refill_at_; }
  bool closed() const {
    std::lock_guard lock(mutex_);
    return closed_;
  }

 private:
  const size_t capacity_;
  const size_t refill_at_;
  mutable std::mutex mutex_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<T> items_;  // guarded by mutex_
  bool closed_ = false;  // guarded by mutex_
};

}  // namespace stoker
