#include "stoker/concurrency/thread_pool.h"

#include <string>
#include <system_error>

namespace stoker {

Result<std::unique_ptr<ThreadPool>> ThreadPool::Make(int num_threads,
                                                     size_t queue_capacity,
                                                     size_t refill_at) {
  if (num_threads < 1) {
    return status::InvalidArgument("num_threads must be >= 1, got ",
                                   std::to_string(num_threads));
  }
  std::unique_ptr<ThreadPool> pool(new ThreadPool(queue_capacity, refill_at));
  try {
    pool->threads_.reserve(num_threads);
    for (int i = 0; i < num_threads; ++i) {
      pool->threads_.emplace_back([p = pool.get(), i] { p->WorkerLoop(i); });
    }
  } catch (const std::system_error& e) {
    pool->Shutdown();  // joins the threads that did start
    return status::Internal("could not start worker thread: ", e.what());
  }
  return pool;
}

ThreadPool::~ThreadPool() { Shutdown(); }

Status ThreadPool::Submit(Task task) {
  if (!queue_.Push(std::move(task))) {
    return status::Cancelled("thread pool is shut down");
  }
  return Status::OK();
}

Status ThreadPool::SubmitFirst(Task task) {
  if (!queue_.PushFront(std::move(task))) {
    return status::Cancelled("thread pool is shut down");
  }
  return Status::OK();
}

void ThreadPool::Shutdown() {
  queue_.Cancel();
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void ThreadPool::WorkerLoop(int worker) {
  while (auto task = queue_.Pop()) {
    (*task)(worker);
  }
}

int ThreadPool::HardwareConcurrency() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace stoker
