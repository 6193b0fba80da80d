#include "stoker/io/http_engine.h"

#include "stoker/io/body_buffers.h"

#include <curl/curl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_set>
#include <vector>

namespace stoker::io {

namespace {

using Clock = std::chrono::steady_clock;

// SHA-256 of an empty payload: S3 wants the payload hash in x-amz-content-sha256, and
// a GET has no body. Sending the real hash (not UNSIGNED-PAYLOAD) keeps the header and
// the hash curl puts in the canonical request identical on every curl version.
constexpr char kEmptySha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr size_t kMaxErrorBody = 16 << 10;

std::once_flag g_curl_init;

size_t Bucket(double ms) {
  const auto& bounds = IoMetrics::kLatencyBoundsMs;
  return std::lower_bound(bounds.begin(), bounds.end(), ms) - bounds.begin();
}

// The <Code> of an S3 XML error body, or "".
std::string ErrorCode(const std::string& body) {
  const size_t open = body.find("<Code>");
  if (open == std::string::npos) return {};
  const size_t start = open + 6, close = body.find("</Code>", start);
  if (close == std::string::npos || close - start > 128) return {};
  return body.substr(start, close - start);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string TrimHeader(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) {
    v.remove_suffix(1);
  }
  return std::string(v);
}

}  // namespace

struct Job {
  HttpRequest request;
  ReadCallback done;
  std::vector<uint8_t> data;  // body bytes of this read so far (across resumed attempts)
  std::string etag;           // of the first response: resumes must match it
  int64_t object_size = -1;
  int attempt = 0;
  int tokens_taken = 0;
  bool resumed_any = false;
  Clock::time_point submitted;
  Clock::time_point due;  // when a retry may start

  // Per attempt.
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  size_t attempt_start = 0;  // data.size() when the attempt began
  int64_t request_offset = 0;
  bool ranged = false;
  bool resuming = false;
  long status = 0;
  int64_t content_length = -1;
  int64_t range_start = -1, range_total = -1;
  int64_t retry_after_ms = -1;  // x-amz-retry-after, when the server sent a valid one
  std::string response_etag;
  std::string error_body;
  Status policy_error;
  bool too_large = false;
  char curl_error[CURL_ERROR_SIZE] = {};
  HttpEngine::Impl* engine = nullptr;
};

struct HttpEngine::Impl {
  ObjectStoreOptions options;
  S3Config s3;
  RetryBudget budget;
  std::string sigv4;
  std::string userpwd_user, userpwd_secret;
  curl_slist* resolve = nullptr;
  std::shared_ptr<BodyBuffers> buffers;

  CURLM* multi = nullptr;
  // The IO thread waits in epoll for the sockets libcurl asks it to watch
  // (CURLMOPT_SOCKETFUNCTION) and hands each ready socket to curl_multi_socket_action,
  // so a wake-up costs in proportion to the sockets that are ready, not to all the
  // transfers in flight (curl_multi_poll + curl_multi_perform visit every one).
  // `wake_fd` (an eventfd in the same set) is how other threads interrupt the wait.
  int epoll_fd = -1;
  int wake_fd = -1;
  Clock::time_point curl_due = Clock::time_point::max();  // CURLMOPT_TIMERFUNCTION's
  std::thread thread;
  std::mutex mutex;
  std::deque<std::unique_ptr<Job>> incoming;  // guarded by mutex
  bool stopping = false;                      // guarded by mutex

  // IO thread only.
  std::vector<CURL*> idle_easy;  // finished handles, reset and reused by the next attempts
  std::deque<std::unique_ptr<Job>> ready;
  std::vector<std::unique_ptr<Job>> waiting;  // backing off
  std::unordered_set<Job*> active;
  std::mt19937_64 rng;

  // Metrics.
  std::atomic<uint64_t> reads_ok{0}, reads_failed{0}, requests{0}, bytes{0}, retries{0},
      resumed{0}, budget_exhausted{0};
  std::atomic<int64_t> in_flight{0}, bytes_in_flight{0};
  std::atomic<int64_t> peak_in_flight{0};  // written by the IO thread only
  mutable std::mutex metrics_mutex;
  std::map<std::string, uint64_t> retries_by_reason, errors_by_reason;
  IoMetrics::Histogram ttfb{}, total{};

  explicit Impl(const ObjectStoreOptions& o, const S3Config& c)
      : options(o), s3(c), budget(o.retry) {}
  ~Impl() {
    if (epoll_fd >= 0) close(epoll_fd);
    if (wake_fd >= 0) close(wake_fd);
  }

  void Run();
  // Keeps a handle removed from the multi handle for the next attempt (as many as can
  // run at once), else frees it.
  void ReleaseEasy(CURL* easy) {
    if (idle_easy.size() < static_cast<size_t>(options.max_in_flight)) {
      idle_easy.push_back(easy);
    } else {
      curl_easy_cleanup(easy);
    }
  }
  void StartAttempt(std::unique_ptr<Job> job);
  void FinishAttempt(Job* job, CURLcode rc);
  void Complete(std::unique_ptr<Job> job, Status status);
  void Retry(std::unique_ptr<Job> job, const Classification& why, bool can_resume);
  Status Describe(const Job& job, StatusCode code, const std::string& cause) const;
  void CountError(const std::string& reason) {
    std::lock_guard lock(metrics_mutex);
    errors_by_reason[reason]++;
  }

  void Wake() {
    const uint64_t one = 1;
    // A full counter (it cannot be, at 2^64 - 2) or EAGAIN still leaves it readable.
    [[maybe_unused]] const ssize_t n = write(wake_fd, &one, sizeof(one));
  }
  static int OnSocket(CURL* easy, curl_socket_t socket, int what, void* user,
                      void* socket_data);
  static int OnTimer(CURLM* multi, long timeout_ms, void* user);

  static size_t OnHeader(char* ptr, size_t size, size_t n, void* user);
  static size_t OnBody(char* ptr, size_t size, size_t n, void* user);
  static curl_socket_t OnOpenSocket(void* user, curlsocktype purpose,
                                    struct curl_sockaddr* address);
};

int HttpEngine::Impl::OnSocket(CURL* /*easy*/, curl_socket_t socket, int what, void* user,
                              void* socket_data) {
  Impl* impl = static_cast<Impl*>(user);
  if (what == CURL_POLL_REMOVE) {
    // The socket may be closed already; then the kernel has dropped it from the set.
    epoll_ctl(impl->epoll_fd, EPOLL_CTL_DEL, socket, nullptr);
    curl_multi_assign(impl->multi, socket, nullptr);
    return 0;
  }
  epoll_event event{};
  event.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
  event.data.fd = socket;
  // socket_data is non-null once the socket is in the set (curl_multi_assign).
  if (socket_data == nullptr) {
    if (epoll_ctl(impl->epoll_fd, EPOLL_CTL_ADD, socket, &event) != 0 && errno == EEXIST) {
      epoll_ctl(impl->epoll_fd, EPOLL_CTL_MOD, socket, &event);
    }
    curl_multi_assign(impl->multi, socket, impl);
  } else {
    epoll_ctl(impl->epoll_fd, EPOLL_CTL_MOD, socket, &event);
  }
  return 0;
}

int HttpEngine::Impl::OnTimer(CURLM* /*multi*/, long timeout_ms, void* user) {
  Impl* impl = static_cast<Impl*>(user);
  impl->curl_due = timeout_ms < 0 ? Clock::time_point::max()
                                  : Clock::now() + std::chrono::milliseconds(timeout_ms);
  return 0;
}

size_t HttpEngine::Impl::OnHeader(char* ptr, size_t size, size_t n, void* user) {
  Job* job = static_cast<Job*>(user);
  const size_t len = size * n;
  std::string_view line(ptr, len);
  if (line.substr(0, 5) == "HTTP/") {
    // A new response (after a 100 Continue, say): forget the previous headers.
    job->content_length = -1;
    job->range_start = job->range_total = -1;
    job->retry_after_ms = -1;
    job->response_etag.clear();
    return len;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return len;
  const std::string name = Lower(std::string(line.substr(0, colon)));
  const std::string value = TrimHeader(line.substr(colon + 1));
  if (name == "content-length") {
    job->content_length = std::strtoll(value.c_str(), nullptr, 10);
  } else if (name == "x-amz-retry-after") {
    // Milliseconds; anything else is ignored, as the AWS SDKs do.
    char* end = nullptr;
    const long long ms = std::strtoll(value.c_str(), &end, 10);
    if (!value.empty() && end != nullptr && *end == '\0' && ms >= 0) {
      job->retry_after_ms = ms;
    }
  } else if (name == "etag") {
    job->response_etag = value;
  } else if (name == "content-range") {
    // "bytes start-end/total" (total may be '*').
    long long start = -1, end = -1;
    if (std::sscanf(value.c_str(), "bytes %lld-%lld", &start, &end) == 2) {
      job->range_start = start;
      const size_t slash = value.find('/');
      if (slash != std::string::npos && value[slash + 1] != '*') {
        job->range_total = std::strtoll(value.c_str() + slash + 1, nullptr, 10);
      }
    }
  }
  return len;
}

size_t HttpEngine::Impl::OnBody(char* ptr, size_t size, size_t n, void* user) {
  Job* job = static_cast<Job*>(user);
  const size_t len = size * n;
  if (job->status == 0)
    curl_easy_getinfo(job->easy, CURLINFO_RESPONSE_CODE, &job->status);
  if (job->status < 200 || job->status >= 300) {
    const size_t room = kMaxErrorBody - std::min(kMaxErrorBody, job->error_body.size());
    job->error_body.append(ptr, std::min(room, len));
    return len;
  }
  if (static_cast<int64_t>(job->data.size() + len) >
      job->engine->options.max_object_bytes) {
    job->too_large = true;
    return CURL_WRITEFUNC_ERROR;
  }
  if (job->data.size() == job->attempt_start && job->content_length > 0) {
    // One buffer for the whole body when the server said its size (capped: a lying
    // header must not make us reserve gigabytes), from the pool when it is a fresh read.
    const size_t want = job->attempt_start +
                        static_cast<size_t>(std::min<int64_t>(
                            job->content_length, job->engine->options.max_object_bytes));
    if (job->data.empty() && job->data.capacity() < want) {
      job->data = job->engine->buffers->Take(want);
    } else {
      job->data.reserve(want);
    }
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(ptr);  // same type: a memcpy
  job->data.insert(job->data.end(), bytes, bytes + len);
  job->engine->bytes_in_flight += static_cast<int64_t>(len);
  job->engine->bytes += len;
  return len;
}

curl_socket_t HttpEngine::Impl::OnOpenSocket(void* user, curlsocktype /*purpose*/,
                                             struct curl_sockaddr* address) {
  Job* job = static_cast<Job*>(user);
  if (job->request.check_address) {
    Status st =
        CheckAddress(job->engine->options.policy, &address->addr, job->request.display);
    if (!st.ok()) {
      job->policy_error = st;
      return CURL_SOCKET_BAD;
    }
  }
  return ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

Status HttpEngine::Impl::Describe(const Job& job, StatusCode code,
                                  const std::string& cause) const {
  return Status(code, "cannot read '" + job.request.display + "': " + cause);
}

void HttpEngine::Impl::StartAttempt(std::unique_ptr<Job> job) {
  Job* j = job.get();
  j->attempt++;
  requests++;
  j->status = 0;
  j->content_length = -1;
  j->range_start = j->range_total = -1;
  j->retry_after_ms = -1;
  j->response_etag.clear();
  j->error_body.clear();
  j->too_large = false;
  j->curl_error[0] = '\0';
  j->resuming = !j->data.empty();
  j->attempt_start = j->data.size();
  j->request_offset = j->request.range.offset + static_cast<int64_t>(j->data.size());
  j->ranged = j->request_offset > 0 || j->request.range.length >= 0;

  CURL* easy = nullptr;
  if (!idle_easy.empty()) {
    easy = idle_easy.back();
    idle_easy.pop_back();
    curl_easy_reset(easy);  // keeps its buffers; every option is set again below
  } else {
    easy = curl_easy_init();
    if (easy == nullptr) {
      Complete(std::move(job), Describe(*j, StatusCode::kInternal, "curl_easy_init failed"));
      return;
    }
  }
  j->easy = easy;
  curl_easy_setopt(easy, CURLOPT_URL, j->request.url.c_str());
  curl_easy_setopt(easy, CURLOPT_PRIVATE, j);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);  // a 3xx is refused below
  curl_easy_setopt(easy, CURLOPT_PROXY, "");           // no proxy from the environment
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, j->curl_error);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &Impl::OnHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, j);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Impl::OnBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, j);
  curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, &Impl::OnOpenSocket);
  curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, j);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options.connect_timeout_s * 1000));
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME,
                   std::max(1L, static_cast<long>(options.stall_timeout_s + 0.5)));
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(options.total_timeout_s * 1000));
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, options.verify_tls ? 1L : 0L);
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, options.verify_tls ? 2L : 0L);
  if (!options.ca_file.empty())
    curl_easy_setopt(easy, CURLOPT_CAINFO, options.ca_file.c_str());

  curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 256L << 10);  // fewer, larger reads
  curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L);  // prefer multiplexing on HTTP/2
  if (resolve != nullptr) curl_easy_setopt(easy, CURLOPT_RESOLVE, resolve);
  // A retry takes a new connection: the old one may be the broken part.
  if (j->attempt > 1) curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, 1L);

  curl_slist* headers = nullptr;
  if (j->ranged) {
    std::string range = "Range: bytes=" + std::to_string(j->request_offset) + "-";
    if (j->request.range.length >= 0) {
      range += std::to_string(j->request.range.offset + j->request.range.length - 1);
    }
    headers = curl_slist_append(headers, range.c_str());
  }
  if (j->resuming) headers = curl_slist_append(headers, ("If-Match: " + j->etag).c_str());
  if (j->request.sign && !s3.credentials.empty()) {
    headers = curl_slist_append(
        headers, (std::string("x-amz-content-sha256: ") + kEmptySha256).c_str());
    if (!s3.credentials.session_token.empty()) {
      headers = curl_slist_append(
          headers, ("x-amz-security-token: " + s3.credentials.session_token).c_str());
    }
    curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(easy, CURLOPT_USERNAME, userpwd_user.c_str());
    curl_easy_setopt(easy, CURLOPT_PASSWORD, userpwd_secret.c_str());
  }
  j->headers = headers;
  if (headers != nullptr) curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);

  const CURLMcode mc = curl_multi_add_handle(multi, easy);
  if (mc != CURLM_OK) {
    curl_easy_cleanup(easy);
    curl_slist_free_all(headers);
    j->easy = nullptr;
    j->headers = nullptr;
    Complete(std::move(job),
             Describe(*j, StatusCode::kInternal,
                      std::string("curl_multi_add_handle: ") + curl_multi_strerror(mc)));
    return;
  }
  const int64_t running = ++in_flight;
  if (running > peak_in_flight.load(std::memory_order_relaxed)) {
    peak_in_flight.store(running, std::memory_order_relaxed);
  }
  active.insert(job.release());
}

void HttpEngine::Impl::Complete(std::unique_ptr<Job> job, Status status) {
  bytes_in_flight -= static_cast<int64_t>(job->data.size());
  const double total_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - job->submitted).count();
  {
    std::lock_guard lock(metrics_mutex);
    total[Bucket(total_ms)]++;
  }
  ObjectInfo info;
  info.size = job->object_size;
  info.etag = job->etag;
  info.attempts = job->attempt;
  if (status.ok()) {
    reads_ok++;
    budget.OnSuccess(job->tokens_taken);
    job->done(Status::OK(), std::move(job->data), std::move(info));
  } else {
    reads_failed++;
    job->done(std::move(status), {}, std::move(info));
  }
}

void HttpEngine::Impl::Retry(std::unique_ptr<Job> job, const Classification& why,
                             bool can_resume) {
  if (job->attempt >= options.retry.max_attempts) {
    CountError("max_attempts");
    Complete(std::move(job),
             Describe(*job, StatusCode::kUnavailable,
                      (why.retry_class == RetryClass::kThrottle ? "throttled: " : "") +
                          std::string("gave up after ") + std::to_string(job->attempt) +
                          " attempts (max attempts reached); last error " + why.reason));
    return;
  }
  const int tokens = budget.Acquire(why.retry_class);
  if (tokens == 0) {
    budget_exhausted++;
    CountError("retry_budget_exhausted");
    Complete(std::move(job),
             Describe(*job, StatusCode::kUnavailable,
                      "retry budget exhausted (the store is failing many requests); "
                      "last error " +
                          why.reason + " on attempt " + std::to_string(job->attempt)));
    return;
  }
  job->tokens_taken += tokens;
  retries++;
  {
    std::lock_guard lock(metrics_mutex);
    retries_by_reason[why.reason]++;
  }
  if (can_resume) {
    resumed++;
    job->resumed_any = true;
  } else {
    bytes_in_flight -= static_cast<int64_t>(job->data.size());
    job->data.clear();
    job->etag.clear();  // starting over: whatever version is there now is the one read
  }
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double delay = BackoffSeconds(options.retry, why.retry_class, job->attempt, unit(rng));
  if (job->retry_after_ms >= 0) {
    // The server's hint wins, but may stretch our own delay by 5 s at most.
    delay = std::max(delay, std::min(job->retry_after_ms / 1000.0, delay + 5.0));
  }
  job->due = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(delay));
  waiting.push_back(std::move(job));
}

void HttpEngine::Impl::FinishAttempt(Job* raw, CURLcode rc) {
  std::unique_ptr<Job> job(raw);
  active.erase(raw);
  in_flight--;
  curl_off_t ttfb_us = 0;
  curl_easy_getinfo(job->easy, CURLINFO_STARTTRANSFER_TIME_T, &ttfb_us);
  curl_easy_getinfo(job->easy, CURLINFO_RESPONSE_CODE, &job->status);
  curl_multi_remove_handle(multi, job->easy);
  ReleaseEasy(job->easy);
  curl_slist_free_all(job->headers);
  job->easy = nullptr;
  job->headers = nullptr;
  if (ttfb_us > 0) {
    std::lock_guard lock(metrics_mutex);
    ttfb[Bucket(static_cast<double>(ttfb_us) / 1000.0)]++;
  }

  if (!job->policy_error.ok()) {
    CountError("policy");
    Complete(std::move(job), job->policy_error);
    return;
  }
  const int64_t received = static_cast<int64_t>(job->data.size() - job->attempt_start);
  const bool body_ok = job->status >= 200 && job->status < 300;
  // A 2xx body cut short can resume from where it stopped when we know which version
  // of the object we were reading.
  if (body_ok && job->etag.empty()) job->etag = job->response_etag;
  // Bytes already held survive a failed attempt when we know which version of the
  // object they belong to; an error reply adds nothing to them, and a 200 to a ranged
  // request (a server ignoring Range) does not line up with them, so it starts over.
  const bool can_resume = !job->etag.empty() && !job->data.empty() &&
                          (!body_ok || job->status == 206 || !job->ranged);

  if (rc != CURLE_OK) {
    if (job->too_large) {
      CountError("too_large");
      Complete(std::move(job),
               Describe(*job, StatusCode::kLimitExceeded,
                        "object larger than max_object_bytes (" +
                            std::to_string(options.max_object_bytes) + ")"));
      return;
    }
    const Classification why = ClassifyCurl(rc);
    if (why.retryable()) {
      Retry(std::move(job), why, can_resume);
      return;
    }
    CountError(why.reason);
    std::string cause = job->curl_error[0] ? job->curl_error : curl_easy_strerror(rc);
    if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE) {
      cause = "TLS certificate verification failed (" + cause +
              "); pass ca_file to trust a private CA";
    }
    Complete(std::move(job), Describe(*job, StatusCode::kIOError, cause));
    return;
  }

  if (!body_ok) {
    const std::string code = ErrorCode(job->error_body);
    const Classification why = ClassifyHttp(static_cast<int>(job->status), code);
    const std::string http =
        "HTTP " + std::to_string(job->status) + (code.empty() ? "" : " " + code);
    if (job->status == 412 && job->resuming) {
      CountError("object_changed");
      Complete(std::move(job),
               Describe(*job, StatusCode::kIOError,
                        "the object changed while it was read (" + http +
                            " on a resumed range with If-Match " + job->etag + ")"));
      return;
    }
    if (why.retryable()) {
      Retry(std::move(job), why, can_resume);
      return;
    }
    CountError(why.reason);
    StatusCode sc = StatusCode::kIOError;
    std::string cause = http;
    if (job->status == 404) {
      sc = StatusCode::kNotFound;
      cause =
          (code == "NoSuchBucket" ? "the bucket does not exist (" : "no such object (") +
          http + ")";
    } else if (job->status == 403) {
      sc = StatusCode::kPermissionDenied;
      cause = "access denied: the object is missing or forbidden (" + http + ")";
    } else if (job->status == 416) {
      sc = StatusCode::kInvalidArgument;
      cause = "range not satisfiable (" + http + ")";
    } else if (job->status >= 300 && job->status < 400) {
      sc = StatusCode::kInvalidArgument;
      cause = "redirect refused by policy (rule: redirects): " + http;
    }
    Complete(std::move(job), Describe(*job, sc, cause));
    return;
  }

  // 2xx: check that we got what we asked for, and all of it.
  if (job->content_length >= 0 && received != job->content_length) {
    Retry(std::move(job), {RetryClass::kTransient, "short_body"}, can_resume);
    return;
  }
  if (job->status == 206) {
    if (job->range_start != job->request_offset) {
      CountError("bad_content_range");
      Complete(std::move(job),
               Describe(*job, StatusCode::kIOError,
                        "the server answered a different range than asked"));
      return;
    }
    if (job->range_total >= 0) job->object_size = job->range_total;
  } else {
    // 200: the whole object, whatever Range asked for. Keep only what was asked.
    job->object_size = static_cast<int64_t>(received);
    if (job->attempt_start > 0) {
      job->data.erase(job->data.begin(), job->data.begin() + job->attempt_start);
      bytes_in_flight -= static_cast<int64_t>(job->attempt_start);
    }
    const int64_t size = static_cast<int64_t>(job->data.size());
    const int64_t start = std::min(job->request.range.offset, size);
    const int64_t end = job->request.range.length < 0
                            ? size
                            : std::min(size, start + job->request.range.length);
    if (start > 0 || end < size) {
      std::vector<uint8_t> slice(job->data.begin() + start, job->data.begin() + end);
      bytes_in_flight -= size - static_cast<int64_t>(slice.size());
      job->data = std::move(slice);
    }
  }
  Complete(std::move(job), Status::OK());
}

void HttpEngine::Impl::Run() {
  for (;;) {
    {
      std::lock_guard lock(mutex);
      if (stopping) break;
      while (!incoming.empty()) {
        ready.push_back(std::move(incoming.front()));
        incoming.pop_front();
      }
    }
    const auto now = Clock::now();
    auto next_due = Clock::time_point::max();
    for (size_t i = 0; i < waiting.size();) {
      if (waiting[i]->due <= now) {
        ready.push_front(std::move(waiting[i]));
        waiting[i] = std::move(waiting.back());
        waiting.pop_back();
      } else {
        next_due = std::min(next_due, waiting[i]->due);
        ++i;
      }
    }
    while (!ready.empty() && static_cast<int>(active.size()) < options.max_in_flight &&
           (bytes_in_flight.load() < options.max_bytes_in_flight || active.empty())) {
      std::unique_ptr<Job> job = std::move(ready.front());
      ready.pop_front();
      StartAttempt(std::move(job));
    }
    int timeout_ms = 1000;
    if (next_due != Clock::time_point::max()) {
      const auto wait =
          std::chrono::duration_cast<std::chrono::milliseconds>(next_due - Clock::now());
      timeout_ms = static_cast<int>(std::clamp<int64_t>(wait.count() + 1, 0, 1000));
    }
    if (!ready.empty() && static_cast<int>(active.size()) < options.max_in_flight) {
      timeout_ms = std::min(timeout_ms, 10);  // bytes bound: re-check soon
    }
    if (curl_due != Clock::time_point::max()) {
      const auto wait =
          std::chrono::ceil<std::chrono::milliseconds>(curl_due - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(wait, 0, timeout_ms));
    }
    epoll_event events[64];
    const int n = epoll_wait(epoll_fd, events, 64, timeout_ms);
    int running = 0;
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd) {
        uint64_t count;
        [[maybe_unused]] const ssize_t r = read(wake_fd, &count, sizeof(count));
        continue;
      }
      const uint32_t ev = events[i].events;
      const int flags = (ev & EPOLLIN ? CURL_CSELECT_IN : 0) |
                        (ev & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                        (ev & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
      curl_multi_socket_action(multi, fd, flags, &running);
    }
    if (curl_due <= Clock::now()) {
      curl_due = Clock::time_point::max();  // the timer callback sets the next one
      curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Job* job = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &job);
      FinishAttempt(job, msg->data.result);
    }
  }
  // Stopping: everything not finished is cancelled.
  std::vector<std::unique_ptr<Job>> rest;
  for (Job* j : active) {
    curl_multi_remove_handle(multi, j->easy);
    curl_easy_cleanup(j->easy);
    curl_slist_free_all(j->headers);
    in_flight--;
    rest.emplace_back(j);
  }
  active.clear();
  for (auto& j : ready) rest.push_back(std::move(j));
  for (auto& j : waiting) rest.push_back(std::move(j));
  {
    std::lock_guard lock(mutex);
    for (auto& j : incoming) rest.push_back(std::move(j));
    incoming.clear();
  }
  for (auto& j : rest) {
    Complete(std::move(j), status::Cancelled("read cancelled: the object store closed"));
  }
  for (CURL* easy : idle_easy) curl_easy_cleanup(easy);
  idle_easy.clear();
}

HttpEngine::HttpEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<HttpEngine>> HttpEngine::Make(const ObjectStoreOptions& options,
                                                     const S3Config& s3,
                                                     std::shared_ptr<BodyBuffers> buffers) {
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  auto impl = std::make_unique<Impl>(options, s3);
  impl->buffers = std::move(buffers);
  impl->sigv4 = "aws:amz:" + s3.region + ":s3";
  impl->userpwd_user = s3.credentials.access_key_id;
  impl->userpwd_secret = s3.credentials.secret_access_key;
  for (const std::string& entry : options.resolve) {
    impl->resolve = curl_slist_append(impl->resolve, entry.c_str());
  }
  impl->rng.seed(options.random_seed ? options.random_seed : std::random_device{}());
  impl->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  impl->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->epoll_fd < 0 || impl->wake_fd < 0) {
    return status::Internal("could not create the IO thread's epoll set: ",
                            std::strerror(errno));
  }
  epoll_event wake{};
  wake.events = EPOLLIN;
  wake.data.fd = impl->wake_fd;
  if (epoll_ctl(impl->epoll_fd, EPOLL_CTL_ADD, impl->wake_fd, &wake) != 0) {
    return status::Internal("could not watch the IO thread's eventfd: ", std::strerror(errno));
  }
  impl->multi = curl_multi_init();
  if (impl->multi == nullptr) return status::Internal("curl_multi_init failed");
  curl_multi_setopt(impl->multi, CURLMOPT_SOCKETFUNCTION, &Impl::OnSocket);
  curl_multi_setopt(impl->multi, CURLMOPT_SOCKETDATA, impl.get());
  curl_multi_setopt(impl->multi, CURLMOPT_TIMERFUNCTION, &Impl::OnTimer);
  curl_multi_setopt(impl->multi, CURLMOPT_TIMERDATA, impl.get());
  curl_multi_setopt(impl->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
                    static_cast<long>(options.max_in_flight));
  curl_multi_setopt(impl->multi, CURLMOPT_MAXCONNECTS,
                    static_cast<long>(options.max_in_flight));
  curl_multi_setopt(impl->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<HttpEngine>(new HttpEngine(std::move(impl)));
}

HttpEngine::~HttpEngine() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->Wake();
  impl_->thread.join();
  curl_multi_cleanup(impl_->multi);
  curl_slist_free_all(impl_->resolve);
  // Secrets: overwrite our copies before the memory is freed (curl keeps its own).
  volatile char* secret = impl_->userpwd_secret.data();
  for (size_t i = 0; i < impl_->userpwd_secret.size(); ++i) secret[i] = '\0';
  impl_->s3.credentials.secret_access_key.assign(
      impl_->s3.credentials.secret_access_key.size(), '\0');
  impl_->s3.credentials.session_token.assign(impl_->s3.credentials.session_token.size(),
                                             '\0');
}

void HttpEngine::Submit(HttpRequest request, ReadCallback done) {
  auto job = std::make_unique<Job>();
  job->request = std::move(request);
  job->done = std::move(done);
  job->submitted = Clock::now();
  job->engine = impl_.get();
  {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->stopping) {
      impl_->incoming.push_back(std::move(job));
    }
  }
  if (job) {  // the store is closing
    job->done(status::Cancelled("read cancelled: the object store closed"), {}, {});
    return;
  }
  impl_->Wake();
}

void HttpEngine::RecordLocal(bool ok, uint64_t bytes, double total_ms,
                             const std::string& error) {
  (ok ? impl_->reads_ok : impl_->reads_failed)++;
  impl_->bytes += bytes;
  std::lock_guard lock(impl_->metrics_mutex);
  impl_->total[Bucket(total_ms)]++;
  if (!ok) impl_->errors_by_reason[error]++;
}

IoMetrics HttpEngine::Metrics() const {
  IoMetrics m;
  m.reads_ok = impl_->reads_ok;
  m.reads_failed = impl_->reads_failed;
  m.requests = impl_->requests;
  m.bytes = impl_->bytes;
  m.retries = impl_->retries;
  m.resumed = impl_->resumed;
  m.budget_exhausted = impl_->budget_exhausted;
  m.in_flight = impl_->in_flight;
  m.peak_in_flight = impl_->peak_in_flight;
  m.bytes_in_flight = impl_->bytes_in_flight;
  std::lock_guard lock(impl_->metrics_mutex);
  m.retries_by_reason = impl_->retries_by_reason;
  m.errors_by_reason = impl_->errors_by_reason;
  m.ttfb_ms = impl_->ttfb;
  m.total_ms = impl_->total;
  return m;
}

}  // namespace stoker::io
