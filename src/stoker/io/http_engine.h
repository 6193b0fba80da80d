// The libcurl multi engine behind ObjectStore (internal: include object_store.h).
//
// One IO thread owns the multi handle and every easy handle; other threads only queue
// requests under a mutex and wake the thread with curl_multi_wakeup. Retries wait on a
// timer list inside the same loop, so a backing-off request holds no thread and no
// connection.
#pragma once

#include <memory>
#include <string>

#include "stoker/io/object_store.h"

namespace stoker::io {

struct HttpRequest {
  std::string url;             // what curl fetches
  std::string display;         // what errors show (redacted)
  bool sign = false;           // SigV4 with the store's credentials
  bool check_address = false;  // apply the policy's address rule at connect time
  ByteRange range;
};

class HttpEngine {
 public:
  // Starts the IO thread. Bodies of known length are filled into buffers from `buffers`.
  static Result<std::unique_ptr<HttpEngine>> Make(const ObjectStoreOptions& options,
                                                  const S3Config& s3,
                                                  std::shared_ptr<BodyBuffers> buffers);
  ~HttpEngine();  // fails what is still queued or running with Cancelled, then joins

  void Submit(HttpRequest request, ReadCallback done);

  // Local reads are counted here too so that one snapshot covers the store.
  void RecordLocal(bool ok, uint64_t bytes, double total_ms, const std::string& error);
  IoMetrics Metrics() const;

  struct Impl;

 private:
  explicit HttpEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoker::io
