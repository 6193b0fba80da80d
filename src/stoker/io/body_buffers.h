// Reusable buffers for object bodies.
//
// Every remote read fills a vector of up to hundreds of KB. Left to malloc, such
// buffers come and go as fresh pages (mmap, or a heap that grows and is trimmed back),
// and at hundreds of MB/s the page faults and the kernel zeroing pages cost more CPU
// than receiving the bytes. Consumers that are done with a body hand its buffer back
// (ObjectStore::Recycle); the next read of a similar size takes it, so the memory stays
// mapped and warm.
//
// This is the IO side's counterpart of stoker::BufferPool (core/buffer_pool.h), with
// the same size classes: bodies travel as io::Body vectors (the ReadCallback's type),
// so the pool holds those rather than raw blocks. It keeps at most
// `max_bytes` of capacity; what is given back beyond that is freed. Thread-safe; every
// call is one short critical section.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "stoker/io/body.h"

namespace stoker::io {

class BodyBuffers {
 public:
  explicit BodyBuffers(int64_t max_bytes) : max_bytes_(max_bytes) {}
  BodyBuffers(const BodyBuffers&) = delete;
  BodyBuffers& operator=(const BodyBuffers&) = delete;

  // An empty vector with capacity for at least `size` bytes (at most twice that): a
  // kept one when there is one, else a new one of the size class's capacity.
  Body Take(size_t size);
  // Keeps `buffer`'s memory for a later Take, or frees it when the pool is full or the
  // buffer is too small or too large to be worth keeping.
  void Give(Body buffer);

  int64_t kept_bytes() const;
  static constexpr size_t kMinKept = size_t{16} << 10;

 private:
  const int64_t max_bytes_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<Body>> by_capacity_;                  // guarded by mutex_
  int64_t kept_bytes_ = 0;                                           // guarded by mutex_
};

}  // namespace stoker::io
