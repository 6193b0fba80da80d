// One interface for every place an object can live: local paths (confined to an image
// root), s3://bucket/key and http(s):// URLs; whole-object and byte-range reads.
//
// Remote reads run on one IO thread driving libcurl's multi interface: many requests in
// flight over reused connections, bounded by count and by bytes held, each retried per
// RetryOptions with a budget shared by the whole store. Local reads submitted
// asynchronously run on a separate reader thread so that neither kind blocks the
// caller's CPU workers.
//
// Threading: every method is thread-safe. Submit never blocks; its callback runs on an
// IO thread and must be quick (hand the bytes to a pool or a queue; never call Read from
// it). Read blocks the calling thread until the object is in `out`.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "stoker/core/status.h"
#include "stoker/io/body.h"
#include "stoker/io/retry.h"
#include "stoker/io/s3_config.h"
#include "stoker/io/uri.h"

namespace stoker::io {

struct ByteRange {
  int64_t offset = 0;
  int64_t length = -1;  // -1: to the end of the object
};

// What the store learned about an object while reading it.
struct ObjectInfo {
  int64_t size = -1;  // the whole object's size when the server said it (or local)
  std::string etag;   // remote only
  int attempts = 0;   // HTTP requests made for this read (0 for local)
};

enum class HttpClient { kAuto, kCurl };

struct ObjectStoreOptions {
  S3Options s3;
  UriPolicy policy;
  RetryOptions retry;
  int max_in_flight = 64;  // concurrent HTTP transfers
  // Body bytes held by unfinished reads above which no new transfer starts.
  int64_t max_bytes_in_flight = int64_t{256} << 20;
  double connect_timeout_s = 5.0;               // TCP + TLS handshake
  double stall_timeout_s = 10.0;                // no byte received for this long
  double total_timeout_s = 120.0;               // one attempt, start to last byte
  int64_t max_object_bytes = int64_t{1} << 30;  // larger bodies fail (LimitExceeded)
  // Capacity of body buffers handed back through Recycle and kept for later reads.
  int64_t kept_body_bytes = int64_t{64} << 20;
  bool verify_tls = true;
  std::string ca_file;  // PEM bundle to trust instead of the system's
  // "host:port:address" entries that bypass DNS (curl's --resolve), e.g. to reach a
  // virtual-hosted bucket name on a test server.
  std::vector<std::string> resolve;
  uint64_t random_seed = 0;  // backoff jitter; 0 draws one
  // Which client plain http:// requests use. kAuto: Stoker's own HTTP/1.1 client (one
  // staging copy, no per-request set-up; see http_engine.cc). kCurl: libcurl, as
  // https:// always does (TLS, HTTP/2).
  HttpClient http_client = HttpClient::kAuto;
};

// A snapshot of the store's counters.
struct IoMetrics {
  static constexpr std::array<double, 13> kLatencyBoundsMs = {
      1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000};
  using Histogram = std::array<uint64_t, kLatencyBoundsMs.size() + 1>;  // last: overflow

  uint64_t reads_ok = 0;  // reads delivered (local and remote)
  uint64_t reads_failed = 0;
  uint64_t requests = 0;  // HTTP requests sent (attempts)
  uint64_t connections = 0;  // connections opened (the rest of the requests reused one)
  uint64_t bytes = 0;     // body bytes received (remote) or read (local)
  uint64_t retries = 0;
  uint64_t resumed = 0;  // retries that resumed a body with Range + If-Match
  uint64_t budget_exhausted = 0;
  int64_t in_flight = 0;  // HTTP transfers running now
  int64_t peak_in_flight = 0;  // the most that ever ran at once
  int64_t bytes_in_flight = 0;
  std::map<std::string, uint64_t> retries_by_reason;
  std::map<std::string, uint64_t> errors_by_reason;
  Histogram ttfb_ms{};   // per request: time to first byte
  Histogram total_ms{};  // per read: submit to completion
};

using ReadCallback = std::function<void(Status status, Body data, ObjectInfo info)>;

class BodyBuffers;
class HttpEngine;
class LocalReader;

class ObjectStore {
 public:
  static Result<std::shared_ptr<ObjectStore>> Make(ObjectStoreOptions options,
                                                   const EnvLookup& env = ProcessEnv());
  ~ObjectStore();
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // Starts reading `uri`; `done` runs exactly once, on an IO thread (or inline when the
  // URI is refused before any IO). Errors name the URI, redacted, and the cause.
  void Submit(const std::string& uri, ByteRange range, ReadCallback done);

  // Reads `uri` into `out` (resized), blocking the calling thread.
  Status Read(const std::string& uri, ByteRange range, Body* out,
              ObjectInfo* info = nullptr);

  // Hands back the buffer of a body the caller is done with: a later read of a similar
  // size fills it instead of fresh memory (bounded by kept_body_bytes).
  void Recycle(Body buffer);
  // The pool behind Recycle, for owners of bodies that may outlive the store.
  const std::shared_ptr<BodyBuffers>& buffers() const { return buffers_; }

  IoMetrics Metrics() const;
  int max_in_flight() const { return options_.max_in_flight; }
  const S3Config& s3_config() const { return s3_config_; }
  // Options and S3 configuration with every secret redacted.
  std::string ToString() const;

 private:
  ObjectStore(ObjectStoreOptions options, S3Config s3_config);
  Status ReadLocal(const Uri& uri, ByteRange range, Body* out, ObjectInfo* info);

  // Not const: the destructor overwrites the secrets they hold.
  ObjectStoreOptions options_;
  S3Config s3_config_;
  std::shared_ptr<BodyBuffers> buffers_;
  std::unique_ptr<HttpEngine> engine_;
  std::unique_ptr<LocalReader> local_;
};

}  // namespace stoker::io
