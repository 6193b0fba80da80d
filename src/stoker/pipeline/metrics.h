// Counters for every stage and for the consumer, cheap enough to be always on.
//
// Workers add to relaxed atomics (no lock, no shared cache line per sample beyond the
// counter itself); Snapshot() reads them for stats(). The consumer side gives the
// trainer's wait ratio: time spent inside next() over the time from the first next()
// call to the latest return.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "stoker/core/status.h"

namespace stoker::pipeline {

using Clock = std::chrono::steady_clock;

inline int64_t NanosSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

struct StageCounters {
  std::atomic<int64_t> busy_ns{0};
  std::atomic<int64_t> items{0};
  std::atomic<int64_t> bytes{0};

  void Add(int64_t ns, int64_t n_items, int64_t n_bytes) {
    busy_ns.fetch_add(ns, std::memory_order_relaxed);
    items.fetch_add(n_items, std::memory_order_relaxed);
    bytes.fetch_add(n_bytes, std::memory_order_relaxed);
  }
};

// One failed sample, as recorded under on_error="skip".
struct SkipRecord {
  std::string sample_key;
  Status status;
};

struct StageSnapshot {
  std::string name;
  double busy_s;
  int64_t items;
  int64_t bytes;
};

struct MetricsSnapshot {
  std::vector<StageSnapshot> stages;
  int64_t batches_delivered;
  int64_t samples_delivered;
  int64_t samples_skipped;
  int64_t samples_truncated;
  int64_t samples_dropped_overlong;
  double consumer_wait_s;
  double consumer_wall_s;
  double consumer_last_wait_s;
  double consumer_max_wait_s;
  std::vector<SkipRecord> recent_skips;  // the most recent kMaxRecentSkips
};

class Metrics {
 public:
  static constexpr size_t kMaxRecentSkips = 32;

  StageCounters parse;    // manifest line -> validated sample (JSON parse)
  StageCounters read;     // image file -> bytes in memory
  StageCounters decode;   // encoded image -> RGB pixels (raw-image batches)
  // With model inputs:
  StageCounters probe;    // image header -> size, grid, limits checked (no decode)
  StageCounters text;     // chat template + tokenize + labels + mRoPE ids (bytes: tokens)
  StageCounters vision;   // decode + resize + normalise + patchify into pixel_values
  StageCounters collate;  // padded batch tensors (bytes: tensor bytes written)

  std::atomic<int64_t> batches_delivered{0};
  std::atomic<int64_t> samples_delivered{0};
  std::atomic<int64_t> samples_skipped{0};
  // Samples over max_length: cut (kTruncate) or replaced by a substitute (kDrop).
  std::atomic<int64_t> samples_truncated{0};
  std::atomic<int64_t> samples_dropped_overlong{0};
  std::atomic<int64_t> consumer_wait_ns{0};
  std::atomic<int64_t> consumer_wall_ns{0};
  // Per next() call that returned a batch (or the end): the latest and the longest wait.
  std::atomic<int64_t> consumer_last_wait_ns{0};
  std::atomic<int64_t> consumer_max_wait_ns{0};

  void RecordNextWait(int64_t ns) {
    consumer_last_wait_ns.store(ns, std::memory_order_relaxed);
    int64_t max = consumer_max_wait_ns.load(std::memory_order_relaxed);
    while (ns > max && !consumer_max_wait_ns.compare_exchange_weak(max, ns)) {
    }
  }

  void RecordSkip(SkipRecord record) {
    samples_skipped.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(skips_mutex_);
    if (recent_skips_.size() == kMaxRecentSkips) recent_skips_.pop_front();
    recent_skips_.push_back(std::move(record));
  }

  MetricsSnapshot Snapshot() const {
    auto stage = [](const char* name, const StageCounters& c) {
      return StageSnapshot{name, c.busy_ns.load(std::memory_order_relaxed) * 1e-9,
                           c.items.load(std::memory_order_relaxed),
                           c.bytes.load(std::memory_order_relaxed)};
    };
    MetricsSnapshot s;
    s.stages = {stage("parse", parse),   stage("read", read),     stage("decode", decode),
                stage("probe", probe),   stage("text", text),     stage("vision", vision),
                stage("collate", collate)};
    s.batches_delivered = batches_delivered.load(std::memory_order_relaxed);
    s.samples_delivered = samples_delivered.load(std::memory_order_relaxed);
    s.samples_skipped = samples_skipped.load(std::memory_order_relaxed);
    s.samples_truncated = samples_truncated.load(std::memory_order_relaxed);
    s.samples_dropped_overlong = samples_dropped_overlong.load(std::memory_order_relaxed);
    s.consumer_wait_s = consumer_wait_ns.load(std::memory_order_relaxed) * 1e-9;
    s.consumer_wall_s = consumer_wall_ns.load(std::memory_order_relaxed) * 1e-9;
    s.consumer_last_wait_s = consumer_last_wait_ns.load(std::memory_order_relaxed) * 1e-9;
    s.consumer_max_wait_s = consumer_max_wait_ns.load(std::memory_order_relaxed) * 1e-9;
    std::lock_guard lock(skips_mutex_);
    s.recent_skips.assign(recent_skips_.begin(), recent_skips_.end());
    return s;
  }

 private:
  mutable std::mutex skips_mutex_;
  std::deque<SkipRecord> recent_skips_;  // guarded by skips_mutex_
};

}  // namespace stoker::pipeline
