// ThreadPool: a fixed set of worker threads running CPU-bound tasks.
//
// Tasks wait in a BoundedQueue, so Submit blocks when producers run ahead of the
// workers. Shutdown() stops taking tasks, drops the ones still queued, waits for the
// running ones and joins every thread; the destructor calls it, so a pool never
// leaves a thread behind. Tasks must not block on IO (see ../io) and should watch the
// pipeline's stop token when they can run long.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "stoker/concurrency/bounded_queue.h"
#include "stoker/core/status.h"

namespace stoker {

class ThreadPool {
 public:
  // Receives the index of the worker running it, in [0, num_threads), so a task can
  // use that worker's scratch memory without locking.
  using Task = std::function<void(int worker)>;

  // `num_threads` >= 1; `queue_capacity` bounds the tasks waiting to run. A Submit
  // blocked on a full queue resumes once `refill_at` tasks are left (BoundedQueue;
  // default: as soon as one task starts).
  static Result<std::unique_ptr<ThreadPool>> Make(int num_threads, size_t queue_capacity,
                                                  size_t refill_at = SIZE_MAX);
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Blocks while the queue is full. Returns Cancelled after Shutdown().
  Status Submit(Task task);

  // Never blocks: the task runs before every queued one. For the second phase of work
  // whose first phase already passed Submit's back-pressure, submitted from a worker
  // (where blocking on a full queue could deadlock the pool). Cancelled after Shutdown().
  Status SubmitFirst(Task task);

  // Idempotent; returns once every worker has exited.
  void Shutdown();

  int num_threads() const { return static_cast<int>(threads_.size()); }

  // The number of threads the hardware runs at once (at least 1).
  static int HardwareConcurrency();

 private:
  ThreadPool(size_t queue_capacity, size_t refill_at) : queue_(queue_capacity, refill_at) {}
  void WorkerLoop(int worker);

  BoundedQueue<Task> queue_;
  std::vector<std::thread> threads_;  // joined by Shutdown()
};

}  // namespace stoker
