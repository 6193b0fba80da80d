#include "stoker/io/object_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "stoker/io/body_buffers.h"
#include "stoker/io/http_engine.h"

namespace stoker::io {

namespace {

using Clock = std::chrono::steady_clock;

Status ValidateOptions(const ObjectStoreOptions& o) {
  if (o.max_in_flight < 1) return status::InvalidArgument("max_in_flight must be >= 1");
  if (o.max_bytes_in_flight < 1) {
    return status::InvalidArgument("max_bytes_in_flight must be >= 1");
  }
  if (o.retry.max_attempts < 1) {
    return status::InvalidArgument("max_attempts must be >= 1");
  }
  if (o.retry.transient_cost < 1 || o.retry.throttle_cost < 1 ||
      o.retry.budget_tokens < 0) {
    return status::InvalidArgument("retry costs must be >= 1 and the budget >= 0");
  }
  if (o.retry.transient_base_s < 0 || o.retry.throttle_base_s < 0 ||
      o.retry.max_backoff_s < 0) {
    return status::InvalidArgument("backoff times must be >= 0");
  }
  if (o.connect_timeout_s <= 0 || o.stall_timeout_s <= 0 || o.total_timeout_s <= 0) {
    return status::InvalidArgument("timeouts must be > 0 seconds");
  }
  if (o.max_object_bytes < 0) {
    return status::InvalidArgument("max_object_bytes must be >= 0");
  }
  return Status::OK();
}

}  // namespace

// Runs asynchronous local reads on its own thread, so that a Submit of a local path
// returns at once like a remote one (a slow disk or network file system then stalls
// this thread, not the caller's CPU workers).
class LocalReader {
 public:
  explicit LocalReader(ObjectStore* store) : store_(store) {}
  ~LocalReader() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void Submit(std::function<void()> work) {
    {
      std::lock_guard lock(mutex_);
      if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
      queue_.push_back(std::move(work));
    }
    cv_.notify_one();
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything queued has run
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work();
    }
  }

  [[maybe_unused]] ObjectStore* store_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

ObjectStore::ObjectStore(ObjectStoreOptions options, S3Config s3_config)
    : options_(std::move(options)), s3_config_(std::move(s3_config)) {}

namespace {
// Overwrites a secret before its memory goes back to the allocator (volatile, so the
// stores are not optimised away as dead).
void Wipe(std::string* secret) {
  volatile char* p = secret->data();
  for (size_t i = 0; i < secret->size(); ++i) p[i] = '\0';
}
}  // namespace

ObjectStore::~ObjectStore() {
  local_.reset();   // runs what is queued, then joins
  engine_.reset();  // cancels what is in flight, then joins
  Wipe(&options_.s3.secret_access_key);
  Wipe(&options_.s3.session_token);
  Wipe(&s3_config_.credentials.secret_access_key);
  Wipe(&s3_config_.credentials.session_token);
}

Result<std::shared_ptr<ObjectStore>> ObjectStore::Make(ObjectStoreOptions options,
                                                       const EnvLookup& env) {
  STOKER_RETURN_NOT_OK(ValidateOptions(options));
  STOKER_ASSIGN_OR_RETURN(S3Config s3, ResolveS3Config(options.s3, env));
  std::shared_ptr<ObjectStore> store(new ObjectStore(std::move(options), std::move(s3)));
  store->buffers_ = std::make_shared<BodyBuffers>(store->options_.kept_body_bytes);
  STOKER_ASSIGN_OR_RETURN(store->engine_, HttpEngine::Make(store->options_,
                                                           store->s3_config_,
                                                           store->buffers_));
  store->local_ = std::make_unique<LocalReader>(store.get());
  return store;
}

Status ObjectStore::ReadLocal(const Uri& uri, ByteRange range, Body* out,
                              ObjectInfo* info) {
  const auto start = Clock::now();
  auto finish = [&](Status st) {
    const double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    engine_->RecordLocal(st.ok(), st.ok() ? out->size() : 0, ms,
                         st.ok() ? "" : std::string(StatusCodeName(st.code())));
    return st;
  };
  auto path = ConfineLocalPath(options_.policy.local_root, uri.path);
  if (!path.ok()) return finish(path.status());
  const int fd = ::open(path->c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return finish(Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIOError,
                         "cannot open '" + uri.path + "': " + std::strerror(err)));
  }
  struct stat st;
  Status result;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    result = status::IOError("cannot read '", uri.path, "': not a regular file");
  } else {
    const int64_t size = st.st_size;
    const int64_t begin = std::min(range.offset, size);
    const int64_t end = range.length < 0 ? size : std::min(size, begin + range.length);
    if (end - begin > options_.max_object_bytes) {
      result = status::LimitExceeded("cannot read '", uri.path,
                                     "': larger than max_object_bytes");
    } else {
      const size_t want = static_cast<size_t>(end - begin);
      if (out->capacity() < want)
        buffers_->Give(std::exchange(*out, buffers_->Take(want)));
      out->resize(want);  // a Body leaves the bytes unset: pread writes each once
      size_t done = 0;
      while (done < out->size()) {
        const ssize_t n = ::pread(fd, out->data() + done, out->size() - done,
                                  static_cast<off_t>(begin + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          result =
              status::IOError("cannot read '", uri.path, "': ", std::strerror(errno));
          break;
        }
        if (n == 0) break;  // the file shrank while we read it
        done += static_cast<size_t>(n);
      }
      out->resize(done);
      if (info != nullptr) info->size = size;
    }
  }
  ::close(fd);
  return finish(result);
}

void ObjectStore::Submit(const std::string& text, ByteRange range, ReadCallback done) {
  auto uri = ParseUri(text);
  Status checked = uri.ok() ? CheckUri(options_.policy, *uri) : uri.status();
  if (checked.ok() && (range.offset < 0 || range.length < -1)) {
    checked = status::InvalidArgument("cannot read '", RedactUri(text),
                                      "': negative range offset or length");
  }
  if (!checked.ok()) {
    engine_->RecordLocal(false, 0, 0, "policy");
    done(checked, {}, {});
    return;
  }
  if (!uri->is_remote()) {
    local_->Submit([this, u = *uri, range, done = std::move(done)] {
      Body data;
      ObjectInfo info;
      Status st = ReadLocal(u, range, &data, &info);
      done(std::move(st), std::move(data), std::move(info));
    });
    return;
  }
  if (range.length == 0) {  // no bytes wanted; "bytes=N-(N-1)" is not a valid range
    engine_->RecordLocal(true, 0, 0, "");
    done(Status::OK(), {}, {});
    return;
  }
  HttpRequest request;
  request.range = range;
  request.display = RedactUri(text);
  if (uri->scheme == Scheme::kS3) {
    request.url = S3ObjectUrl(s3_config_, uri->host, uri->path);
    request.sign = true;
    request.check_address = false;  // the configured endpoint is trusted
  } else {
    request.url = text;
    request.check_address = true;
  }
  engine_->Submit(std::move(request), std::move(done));
}

Status ObjectStore::Read(const std::string& uri, ByteRange range, Body* out,
                         ObjectInfo* info) {
  auto parsed = ParseUri(uri);
  if (range.offset < 0 || range.length < -1) {
    return status::InvalidArgument("cannot read '", RedactUri(uri),
                                   "': negative range offset or length");
  }
  if (parsed.ok() && !parsed->is_remote()) {
    STOKER_RETURN_NOT_OK(CheckUri(options_.policy, *parsed));
    // A blocking local read runs on the caller's thread: it would wait anyway.
    return ReadLocal(*parsed, range, out, info);
  }
  std::mutex mutex;
  std::condition_variable cv;
  bool finished = false;
  Status result;
  Submit(uri, range, [&](Status st, Body data, ObjectInfo got) {
    std::lock_guard lock(mutex);
    result = std::move(st);
    buffers_->Give(std::exchange(*out, std::move(data)));  // keeps the caller's old one
    if (info != nullptr) *info = std::move(got);
    finished = true;
    cv.notify_one();
  });
  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return finished; });
  return result;
}

void ObjectStore::Recycle(Body buffer) { buffers_->Give(std::move(buffer)); }

IoMetrics ObjectStore::Metrics() const { return engine_->Metrics(); }

std::string ObjectStore::ToString() const {
  return "ObjectStore(" + s3_config_.ToString() +
         ", max_in_flight=" + std::to_string(options_.max_in_flight) +
         ", max_attempts=" + std::to_string(options_.retry.max_attempts) +
         ", verify_tls=" + (options_.verify_tls ? "true" : "false") +
         ", http_client=" + (options_.http_client == HttpClient::kCurl ? "curl" : "auto") + ")";
}

}  // namespace stoker::io
