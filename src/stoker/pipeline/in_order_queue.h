// InOrderQueue<T>: the in-order assembler and the prefetch queue in one object.
//
// Items are numbered 0, 1, 2, ... by the plan. Producers finish them in any order and
// Put() them; the consumer's Next() returns them strictly by number. Admission is
// bounded by the prefetch depth: the producer may start item `seq` only once
// `seq < requested + depth`, where `requested` counts the Next() calls made so far.
//   depth = 0: work on item k starts when the consumer asks for it (no prefetch);
//   depth = d: up to d items are prepared ahead of the one the consumer waits for.
// So at most depth + 1 items exist at any time, which bounds memory whatever the
// speed of the consumer.
//
// Thread-safe. Lock order: only mutex_. Close() wakes every waiter; after it,
// WaitAdmit returns false and Next returns kClosed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

namespace stoker {

template <typename T>
class InOrderQueue {
 public:
  enum class NextResult { kItem, kTimeout, kClosed };

  explicit InOrderQueue(int64_t depth) : depth_(depth < 0 ? 0 : depth) {}

  // Producer: blocks until item `seq` may be started. False once closed.
  bool WaitAdmit(int64_t seq) {
    std::unique_lock lock(mutex_);
    admit_.wait(lock, [&] { return closed_ || seq < requested_ + depth_; });
    return !closed_;
  }

  // Producer: item `seq` is complete. Any order; each seq at most once.
  void Put(int64_t seq, T item) {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    ready_.emplace(seq, std::move(item));
    if (seq == next_) ready_cv_.notify_all();
  }

  // Consumer: waits up to `timeout` for the next item in order. On kTimeout call again:
  // the request stays registered, so admission does not move twice.
  NextResult Next(std::chrono::milliseconds timeout, T* out) {
    std::unique_lock lock(mutex_);
    if (requested_ <= next_) {
      requested_ = next_ + 1;
      admit_.notify_all();
    }
    if (!ready_cv_.wait_for(lock, timeout, [&] {
          return closed_ || ready_.count(next_) != 0;
        })) {
      return NextResult::kTimeout;
    }
    auto it = ready_.find(next_);
    if (it == ready_.end()) return NextResult::kClosed;
    *out = std::move(it->second);
    ready_.erase(it);
    ++next_;
    return NextResult::kItem;
  }

  // Wakes all waiters and drops items not yet taken.
  void Close() {
    std::map<int64_t, T> dropped;
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
      dropped.swap(ready_);
      admit_.notify_all();
      ready_cv_.notify_all();
    }
  }

  int64_t depth() const { return depth_; }
  // Items complete and waiting for the consumer.
  size_t ready_count() const {
    std::lock_guard lock(mutex_);
    return ready_.size();
  }

 private:
  const int64_t depth_;
  mutable std::mutex mutex_;
  std::condition_variable admit_;     // producers wait for room
  std::condition_variable ready_cv_;  // the consumer waits for item next_
  std::map<int64_t, T> ready_;        // guarded by mutex_; at most depth_ + 1 entries
  int64_t next_ = 0;                  // guarded by mutex_: the next seq to hand out
  int64_t requested_ = 0;             // guarded by mutex_: Next() calls begun
  bool closed_ = false;               // guarded by mutex_
};

}  // namespace stoker
