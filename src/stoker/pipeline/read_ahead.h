// Read-ahead of a sample's images through an object store.
//
// With object storage the time of a read is mostly waiting (a first byte from S3 takes
// tens of milliseconds), and a worker that reads when it reaches a sample waits once
// per image with nothing else to do. So the scheduler starts the reads of every sample
// it admits (up to `prefetch` batches ahead) on the store's IO thread, and the worker
// that later prepares the sample takes the bytes, waiting only if they have not
// arrived. Reads then overlap across samples and batches, up to the store's own
// in-flight limits, whatever the number of CPU workers.
//
// Memory: the encoded bytes of at most `prefetch` admitted batches, an order of
// magnitude less than their pixel_values.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "stoker/core/status.h"
#include "stoker/io/body.h"

namespace stoker::io {
class BodyBuffers;
class ObjectStore;
}

namespace stoker::pipeline {

// The reads started for one sample's images, in the order the sample names them.
class ImageReads {
 public:
  // Starts reading each of `refs` (resolved against `image_root` as ReadImage does).
  // Never blocks; the store's callbacks keep the returned object alive. A Take waiting
  // when `stop` is requested returns Cancelled.
  static std::shared_ptr<ImageReads> Start(io::ObjectStore& store,
                                           const std::string& image_root,
                                           const std::vector<std::string>& refs,
                                           std::stop_token stop);

  // If image `index` of the sample was read ahead under the same `ref` and not taken
  // yet: waits for its read, moves the bytes into *out, sets *status and returns true.
  // False when it was not read ahead: ReadImage then reads it itself.
  bool Take(size_t index, const std::string& ref, io::Body* out, Status* status);

  size_t size() const { return slots_.size(); }

 private:
  struct Slot {
    std::string ref;
    bool done = false;
    bool taken = false;
    Status status;
    io::Body data;
  };
  std::mutex mu_;  // guards the slots' done/status/data
  std::condition_variable done_;
  std::vector<Slot> slots_;
  std::stop_token stop_;
  std::shared_ptr<io::BodyBuffers> pool_;  // the store's: takes the callers' old buffers
};

}  // namespace stoker::pipeline
