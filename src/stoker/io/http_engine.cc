#include "stoker/io/http_engine.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "stoker/core/streaming_copy.h"
#include "stoker/io/body_buffers.h"
#include "stoker/io/http1.h"
#include "stoker/io/sigv4.h"
#include "stoker/io/uri.h"

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

// A header line from libcurl: its line end, then surrounding spaces and tabs, go.
std::string_view TrimHeader(std::string_view v) {
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n')) v.remove_suffix(1);
  return TrimSpaces(v);
}

bool ParseInt(std::string_view text, int64_t* out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

// --- The own HTTP/1.1 client's pieces -----------------------------------------------

// epoll's user data: a libcurl socket or the eventfd is stored as the fd; a connection
// of the own client as its pointer with the top bit set (user-space pointers never
// have it).
constexpr uint64_t kConnTag = uint64_t{1} << 63;
// The kernel copies received bytes into this buffer, and the engine copies them on into
// the body. One buffer for every connection, 64-byte aligned, so it stays in L2: the
// kernel's copy into cold or misaligned memory (a body vector, or one buffer per
// transfer as in libcurl) measured twice as slow as the two copies together.
constexpr size_t kStagingBytes = 256 << 10;
constexpr size_t kMaxHeadBytes = 64 << 10;
constexpr auto kSweepEvery = std::chrono::milliseconds(50);  // timeouts' resolution
constexpr size_t kMaxDnsEntries = 1024;

// Bytes a request-target may carry as they are; others are percent-encoded, as curl
// does with a URL it is given.
bool PlainInTarget(unsigned char c) {
  return c > 0x20 && c < 0x7f && c != '"' && c != '<' && c != '>' && c != '\\' &&
         c != '^' && c != '`' && c != '{' && c != '|' && c != '}';
}

// getaddrinfo blocks, so host names are resolved on a thread of their own. Answers
// come back through `answers` and the IO thread's eventfd. The IO thread does not wait
// for this thread when the store closes (a lookup can hang for seconds); the state is
// shared, and the eventfd it writes is its own duplicate.
struct Resolver {
  struct Answer {
    std::string key;
    std::vector<sockaddr_storage> addresses;
    std::string error;
  };
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::tuple<std::string, std::string, int>> queue;  // key, host, port
  std::vector<Answer> answers;
  bool stop = false;
  int wake_fd = -1;
  ~Resolver() {
    if (wake_fd >= 0) close(wake_fd);
  }

  static void Loop(std::shared_ptr<Resolver> self) {
    for (;;) {
      std::string key, host;
      int port = 0;
      {
        std::unique_lock lock(self->mutex);
        self->cv.wait(lock, [&] { return self->stop || !self->queue.empty(); });
        if (self->stop) return;
        std::tie(key, host, port) = std::move(self->queue.front());
        self->queue.pop_front();
      }
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* found = nullptr;
      Answer answer;
      answer.key = std::move(key);
      const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
      if (rc != 0) {
        answer.error = gai_strerror(rc);
      } else {
        for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
          if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
          sockaddr_storage address{};
          std::memcpy(&address, a->ai_addr, a->ai_addrlen);
          if (a->ai_family == AF_INET) {
            reinterpret_cast<sockaddr_in*>(&address)->sin_port = htons(port);
          } else {
            reinterpret_cast<sockaddr_in6*>(&address)->sin6_port = htons(port);
          }
          answer.addresses.push_back(address);
        }
        freeaddrinfo(found);
        if (answer.addresses.empty()) answer.error = "no IPv4 or IPv6 address";
      }
      {
        std::lock_guard lock(self->mutex);
        self->answers.push_back(std::move(answer));
      }
      const uint64_t one = 1;
      [[maybe_unused]] const ssize_t n = write(self->wake_fd, &one, sizeof(one));
    }
  }
};

// A numeric address ("127.0.0.1", "::1", and inet_aton's spellings) with `port`.
bool NumericAddress(const std::string& host, int port, sockaddr_storage* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (out->ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(out)->sin_port = htons(port);
  } else if (out->ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(out)->sin6_port = htons(port);
  } else {
    return false;
  }
  return true;
}

}  // namespace

struct Job;

// A connection of the own HTTP/1.1 client. One request at a time (no pipelining);
// kept open between requests to the same host and port.
struct Conn {
  enum class State { kResolving, kConnecting, kSending, kHead, kBody, kIdle };
  State state = State::kResolving;
  int fd = -1;
  std::string key;  // "host:port": the DNS cache's and the idle pool's key
  std::string host;
  int port = 80;
  Job* job = nullptr;
  std::vector<sockaddr_storage> addresses;
  size_t next_address = 0;
  int connect_errno = 0;
  std::string out;  // the request
  size_t out_sent = 0;
  std::string head;  // a response head split over reads
  ResponseHead response;
  int64_t body_left = 0;  // of a Content-Length body
  bool until_close = false;
  ChunkedDecoder chunks;
  bool reused = false;  // came from the idle pool
  bool resent = false;  // a stale reused connection's request went out again once
  bool got_byte = false;
  bool broken = false;  // must not carry another request
  Clock::time_point last_progress;
  Clock::time_point connect_started;  // of the current resolve-and-connect
};

struct Job {
  HttpRequest request;
  ReadCallback done;
  Body data;                  // body bytes of this read so far (across resumed attempts)
  std::string etag;           // of the first response: resumes must match it
  int64_t object_size = -1;
  int attempt = 0;
  int tokens_taken = 0;
  bool resumed_any = false;
  Clock::time_point submitted;
  Clock::time_point due;  // when a retry may start

  // Per attempt.
  CURL* easy = nullptr;  // a libcurl transfer, or
  Conn* conn = nullptr;  // the own client's connection (plain http://)
  Clock::time_point attempt_started;
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
  std::atomic<uint64_t> reads_ok{0}, reads_failed{0}, requests{0}, connections{0},
      bytes{0}, retries{0}, resumed{0}, budget_exhausted{0};
  std::atomic<int64_t> in_flight{0}, bytes_in_flight{0};
  std::atomic<int64_t> peak_in_flight{0};  // written by the IO thread only
  mutable std::mutex metrics_mutex;
  std::map<std::string, uint64_t> retries_by_reason, errors_by_reason;
  IoMetrics::Histogram ttfb{}, total{};

  // The own HTTP/1.1 client (IO thread only; the resolver hands over under its mutex).
  std::unique_ptr<SigV4Signer> signer;
  uint8_t* staging = nullptr;  // kStagingBytes, 64-byte aligned
  std::unordered_map<std::string, std::vector<Conn*>> idle_conns;  // by key, newest last
  size_t idle_total = 0;
  std::unordered_map<std::string, sockaddr_storage> pinned;  // options.resolve
  struct DnsEntry {
    std::vector<sockaddr_storage> addresses;
    Clock::time_point expires;
  };
  std::unordered_map<std::string, DnsEntry> dns_cache;
  std::unordered_map<std::string, std::vector<Conn*>> dns_waiting;
  std::shared_ptr<Resolver> resolver;  // started by the first name that needs DNS
  Clock::time_point next_sweep;
  std::string amz_date;
  std::time_t amz_date_second = -1;

  explicit Impl(const ObjectStoreOptions& o, const S3Config& c)
      : options(o), s3(c), budget(o.retry) {}
  ~Impl() {
    if (epoll_fd >= 0) close(epoll_fd);
    if (wake_fd >= 0) close(wake_fd);
    std::free(staging);
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
  // Appends received body bytes (or error-reply bytes) to the job; false when the body
  // outgrew max_object_bytes (job->too_large is then set).
  bool TakeBody(Job* job, const uint8_t* bytes, size_t len);

  // The own client. Each of these that returns bool returns false once the connection
  // no longer belongs to the attempt (finished, failed, or handed to the idle pool).
  bool UseOwnClient(const Job& job) const;
  void StartOwn(Job* job);
  void Resolve(Conn* c);
  void Connect(Conn* c);
  void OnConnEvent(Conn* c, uint32_t events);
  void Send(Conn* c);
  void Receive(Conn* c, bool peer_closing);
  bool OnBytes(Conn* c, const uint8_t* p, size_t n);
  bool OnHead(Conn* c, std::string_view head, const uint8_t* rest, size_t rest_n);
  bool OnBodyBytes(Conn* c, const uint8_t* p, size_t n);
  bool OnClosed(Conn* c, int error);
  bool Reopen(Conn* c);
  bool Done(Conn* c);
  bool Fail(Conn* c, CURLcode code, const std::string& message);
  void CloseConn(Conn* c);
  void DropIdle(Conn* c);
  void OnDnsAnswers();
  void Sweep(Clock::time_point now);
  const std::string& AmzDate();
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
  event.data.u64 = static_cast<uint64_t>(socket);
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

namespace {

// A new response (after a 100 Continue, say): forget the previous one's headers.
void ForgetHeaders(Job* job) {
  job->content_length = -1;
  job->range_start = job->range_total = -1;
  job->retry_after_ms = -1;
  job->response_etag.clear();
}

// The headers the engine acts on, from either client.
void ApplyHeader(Job* job, std::string_view name, std::string_view value) {
  int64_t number = 0;
  if (HeaderIs(name, "content-length")) {
    job->content_length = ParseInt(value, &number) ? number : -1;
  } else if (HeaderIs(name, "x-amz-retry-after")) {
    // Milliseconds; anything else is ignored, as the AWS SDKs do.
    if (ParseInt(value, &number) && number >= 0) job->retry_after_ms = number;
  } else if (HeaderIs(name, "etag")) {
    // It goes back to the server in If-Match: no control characters (a stray CR would
    // end that header early). Without a usable ETag a cut-off read starts over.
    const bool clean = std::none_of(value.begin(), value.end(), [](char ch) {
      return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f;
    });
    job->response_etag = clean ? std::string(value) : std::string();
  } else if (HeaderIs(name, "content-range")) {
    // "bytes start-end/total" (total may be '*').
    if (value.substr(0, 6) != "bytes ") return;
    value.remove_prefix(6);
    const size_t dash = value.find('-'), slash = value.find('/');
    if (dash == std::string_view::npos) return;
    int64_t start = -1, end = -1;
    const std::string_view end_text = value.substr(
        dash + 1, slash == std::string_view::npos ? slash : slash - dash - 1);
    if (!ParseInt(value.substr(0, dash), &start) || !ParseInt(end_text, &end)) return;
    job->range_start = start;
    if (slash != std::string_view::npos && ParseInt(value.substr(slash + 1), &number)) {
      job->range_total = number;
    }
  }
}

}  // namespace

size_t HttpEngine::Impl::OnHeader(char* ptr, size_t size, size_t n, void* user) {
  Job* job = static_cast<Job*>(user);
  const size_t len = size * n;
  std::string_view line(ptr, len);
  if (line.substr(0, 5) == "HTTP/") {
    ForgetHeaders(job);
    return len;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return len;
  ApplyHeader(job, TrimHeader(line.substr(0, colon)), TrimHeader(line.substr(colon + 1)));
  return len;
}

size_t HttpEngine::Impl::OnBody(char* ptr, size_t size, size_t n, void* user) {
  Job* job = static_cast<Job*>(user);
  const size_t len = size * n;
  if (job->status == 0)
    curl_easy_getinfo(job->easy, CURLINFO_RESPONSE_CODE, &job->status);
  return job->engine->TakeBody(job, reinterpret_cast<const uint8_t*>(ptr), len)
             ? len
             : CURL_WRITEFUNC_ERROR;
}

bool HttpEngine::Impl::TakeBody(Job* job, const uint8_t* bytes, size_t len) {
  if (job->status < 200 || job->status >= 300) {
    const size_t room = kMaxErrorBody - std::min(kMaxErrorBody, job->error_body.size());
    job->error_body.append(reinterpret_cast<const char*>(bytes), std::min(room, len));
    return true;
  }
  if (static_cast<int64_t>(job->data.size() + len) > options.max_object_bytes) {
    job->too_large = true;
    return false;
  }
  if (job->data.size() == job->attempt_start && job->content_length > 0) {
    // One buffer for the whole body when the server said its size (capped: a lying
    // header must not make us reserve gigabytes), from the pool when it is a fresh read.
    const size_t want =
        job->attempt_start + static_cast<size_t>(std::min<int64_t>(
                                 job->content_length, options.max_object_bytes));
    if (job->data.empty() && job->data.capacity() < want) {
      job->data = buffers->Take(want);
    } else {
      job->data.reserve(want);
    }
  }
  // Another thread reads the body later, after this copy has left the cache: streaming
  // stores spare reading each destination line before writing it. (Growing a Body
  // leaves its new bytes unset, so this is the only pass over them.)
  const size_t old_size = job->data.size();
  job->data.resize(old_size + len);
  StreamingCopy(job->data.data() + old_size, bytes, len);
  bytes_in_flight += static_cast<int64_t>(len);
  this->bytes += len;
  return true;
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
  j->attempt_started = Clock::now();

  if (UseOwnClient(*j)) {
    const int64_t running = ++in_flight;
    if (running > peak_in_flight.load(std::memory_order_relaxed)) {
      peak_in_flight.store(running, std::memory_order_relaxed);
    }
    active.insert(job.release());
    StartOwn(j);  // may finish the attempt at once (a connect refused, say)
    return;
  }

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

// --- The own HTTP/1.1 client ---------------------------------------------------------
//
// Plain http:// requests do not go through libcurl. At hundreds of MB/s a libcurl
// transfer costs the kernel's copy into that transfer's own receive buffer (cold, and
// as many as there are transfers), a second copy into the body, and libcurl's set-up
// of every request (two dozen options, SigV4 with five HMACs). Here every connection
// receives into one hot staging buffer, requests are a few appends, and the signing
// key is cached per day. https:// keeps libcurl, for TLS and HTTP/2.
//
// The behaviour matches the libcurl path's, so FinishAttempt serves both: failures
// carry the CURLcode libcurl would have given (ClassifyCurl decides retries), a retry
// takes a fresh connection, a reused connection that the server had closed is sent
// the request again once on a new one (as libcurl does), the policy's address rule is
// checked on every resolved address before connecting, and 3xx are not followed.

bool HttpEngine::Impl::UseOwnClient(const Job& job) const {
  return options.http_client == HttpClient::kAuto && job.request.url.size() > 7 &&
         strncasecmp(job.request.url.c_str(), "http://", 7) == 0;
}

const std::string& HttpEngine::Impl::AmzDate() {
  const std::time_t now = std::time(nullptr);
  if (now != amz_date_second) {
    amz_date = SigV4Signer::AmzDate(now);
    amz_date_second = now;
  }
  return amz_date;
}

void HttpEngine::Impl::StartOwn(Job* j) {
  Result<Uri> uri = ParseUri(j->request.url);
  if (!uri.ok()) {
    std::snprintf(j->curl_error, sizeof(j->curl_error), "%s",
                  uri.status().message().c_str());
    FinishAttempt(j, CURLE_URL_MALFORMAT);
    return;
  }
  const bool host_ok = std::all_of(uri->host.begin(), uri->host.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '.' ||
           ch == '_' || ch == ':' || ch == '%';
  });
  if (!host_ok) {
    std::snprintf(j->curl_error, sizeof(j->curl_error), "%s",
                  "the host name has characters a host name cannot have");
    FinishAttempt(j, CURLE_URL_MALFORMAT);
    return;
  }
  const int port = uri->port != 0 ? uri->port : 80;
  std::string key = uri->host;
  key += ':';
  key += std::to_string(port);

  Conn* c = nullptr;
  if (j->attempt == 1) {  // a retry takes a new connection: the old one may be the fault
    auto it = idle_conns.find(key);
    if (it != idle_conns.end()) {
      c = it->second.back();  // the pool keeps no empty lists
      it->second.pop_back();
      if (it->second.empty()) idle_conns.erase(it);
      idle_total--;
    }
  }
  if (c == nullptr) {
    c = new Conn;
    c->key = std::move(key);
    c->host = uri->host;
    c->port = port;
  }
  c->job = j;
  j->conn = c;
  c->out_sent = 0;
  c->head.clear();
  c->chunks.Reset();
  c->until_close = false;
  c->body_left = 0;
  c->resent = false;
  c->got_byte = false;
  c->broken = false;
  c->last_progress = j->attempt_started;

  // The request. Its header values are the URL's host (checked above), numbers, the
  // configured session token, and the server's ETag (ApplyHeader drops one with control
  // characters).
  std::string host_header =
      uri->host.find(':') != std::string::npos ? "[" + uri->host + "]" : uri->host;
  if (port != 80) host_header += ":" + std::to_string(port);
  const std::string target = PercentEncode(uri->path, PlainInTarget);
  std::string range, if_match;
  if (j->ranged) {
    range = "bytes=" + std::to_string(j->request_offset) + "-";
    if (j->request.range.length >= 0) {
      range += std::to_string(j->request.range.offset + j->request.range.length - 1);
    }
  }
  if (j->resuming) if_match = j->etag;

  std::string& o = c->out;
  o.clear();
  o.append("GET ").append(target).append(" HTTP/1.1\r\nHost: ").append(host_header);
  o.append("\r\nAccept: */*\r\n");
  if (!range.empty()) o.append("Range: ").append(range).append("\r\n");
  if (!if_match.empty()) o.append("If-Match: ").append(if_match).append("\r\n");
  if (j->request.sign && signer != nullptr) {
    const std::string& date = AmzDate();
    const std::string& token = s3.credentials.session_token;
    std::vector<std::pair<std::string_view, std::string_view>> signed_headers;
    signed_headers.reserve(6);
    signed_headers.emplace_back("host", host_header);  // sorted by name from here on
    if (!if_match.empty()) signed_headers.emplace_back("if-match", if_match);
    if (!range.empty()) signed_headers.emplace_back("range", range);
    signed_headers.emplace_back("x-amz-content-sha256", kEmptySha256);
    signed_headers.emplace_back("x-amz-date", date);
    if (!token.empty()) signed_headers.emplace_back("x-amz-security-token", token);
    // S3 object URLs carry no query (S3ObjectUrl encodes a '?' in a key); a query
    // would have to be sorted here to sign it.
    const size_t query = target.find('?');
    const std::string_view path = std::string_view(target).substr(0, query);
    const std::string_view query_text = query == std::string::npos
                                            ? std::string_view()
                                            : std::string_view(target).substr(query + 1);
    o.append("x-amz-content-sha256: ").append(kEmptySha256).append("\r\n");
    o.append("x-amz-date: ").append(date).append("\r\n");
    if (!token.empty()) o.append("x-amz-security-token: ").append(token).append("\r\n");
    const std::string authorization = signer->Authorization(
        "GET", path, query_text, signed_headers, kEmptySha256, date);
    if (authorization.empty()) {
      Fail(c, CURLE_OUT_OF_MEMORY, "could not sign the request (OpenSSL failed)");
      return;
    }
    o.append("Authorization: ").append(authorization).append("\r\n");
  }
  o.append("\r\n");

  if (c->fd >= 0) {
    c->reused = true;
    c->state = Conn::State::kSending;
    Send(c);
    return;
  }
  c->reused = false;
  Resolve(c);
}

void HttpEngine::Impl::Resolve(Conn* c) {
  c->connect_started = Clock::now();
  c->addresses.clear();
  c->next_address = 0;
  c->connect_errno = 0;
  if (auto it = pinned.find(c->key); it != pinned.end()) {
    c->addresses.push_back(it->second);
    Connect(c);
    return;
  }
  sockaddr_storage numeric;
  if (NumericAddress(c->host, c->port, &numeric)) {
    c->addresses.push_back(numeric);
    Connect(c);
    return;
  }
  if (auto it = dns_cache.find(c->key); it != dns_cache.end()) {
    if (it->second.expires > Clock::now()) {
      c->addresses = it->second.addresses;
      Connect(c);
      return;
    }
    dns_cache.erase(it);
  }
  c->state = Conn::State::kResolving;
  std::vector<Conn*>& waiting_here = dns_waiting[c->key];
  waiting_here.push_back(c);
  if (waiting_here.size() > 1) return;  // its lookup is under way
  if (resolver == nullptr) {
    resolver = std::make_shared<Resolver>();
    resolver->wake_fd = dup(wake_fd);
    std::thread(Resolver::Loop, resolver).detach();
  }
  {
    std::lock_guard lock(resolver->mutex);
    resolver->queue.emplace_back(c->key, c->host, c->port);
  }
  resolver->cv.notify_one();
}

void HttpEngine::Impl::OnDnsAnswers() {
  std::vector<Resolver::Answer> answers;
  {
    std::lock_guard lock(resolver->mutex);
    answers.swap(resolver->answers);
  }
  for (Resolver::Answer& answer : answers) {
    auto it = dns_waiting.find(answer.key);
    std::vector<Conn*> conns;
    if (it != dns_waiting.end()) {
      conns.swap(it->second);
      dns_waiting.erase(it);
    }
    if (answer.error.empty()) {
      const auto now = Clock::now();
      if (dns_cache.size() >=
          kMaxDnsEntries) {  // bounded, however many hosts a manifest names
        std::erase_if(dns_cache,
                      [now](const auto& entry) { return entry.second.expires <= now; });
        if (dns_cache.size() >= kMaxDnsEntries) dns_cache.clear();
      }
      dns_cache[answer.key] = {answer.addresses, now + std::chrono::seconds(60)};
    }
    for (Conn* c : conns) {
      if (!answer.error.empty()) {
        Fail(c, CURLE_COULDNT_RESOLVE_HOST,
             "could not resolve host '" + c->host + "': " + answer.error);
      } else {
        c->addresses = answer.addresses;
        c->next_address = 0;
        Connect(c);
      }
    }
  }
}

void HttpEngine::Impl::Connect(Conn* c) {
  Job* j = c->job;
  while (c->next_address < c->addresses.size()) {
    const sockaddr_storage& address = c->addresses[c->next_address++];
    const auto* sa = reinterpret_cast<const sockaddr*>(&address);
    if (j->request.check_address) {
      Status st = CheckAddress(options.policy, sa, j->request.display);
      if (!st.ok()) {
        if (j->policy_error.ok()) j->policy_error = st;
        continue;
      }
    }
    const int fd =
        ::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      c->connect_errno = errno;
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const socklen_t len =
        address.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (::connect(fd, sa, len) != 0 && errno != EINPROGRESS) {
      c->connect_errno = errno;
      close(fd);
      continue;
    }
    // Edge-triggered, both directions, registered once for the connection's life: no
    // epoll_ctl per request. Every handler reads or writes until the kernel says EAGAIN.
    epoll_event event{};
    event.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    event.data.u64 = reinterpret_cast<uint64_t>(c) | kConnTag;
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
      c->connect_errno = errno;
      close(fd);
      continue;
    }
    c->fd = fd;
    c->state = Conn::State::kConnecting;
    return;
  }
  if (!j->policy_error.ok()) {
    Fail(c, CURLE_COULDNT_CONNECT, "refused by policy");  // FinishAttempt reports it
    return;
  }
  Fail(c, CURLE_COULDNT_CONNECT,
       "could not connect to " + c->key + ": " +
           std::strerror(c->connect_errno ? c->connect_errno : ECONNREFUSED));
}

void HttpEngine::Impl::OnConnEvent(Conn* c, uint32_t events) {
  // Edge-triggered EPOLLOUT also fires whenever acknowledged data frees send space;
  // only the states that write care about it.
  const bool readable = (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
  switch (c->state) {
    case Conn::State::kIdle:
      // The server closed an idle connection (or sent bytes nobody asked for).
      if (readable) DropIdle(c);
      return;
    case Conn::State::kResolving:
      return;
    case Conn::State::kConnecting: {
      int error = 0;
      socklen_t len = sizeof(error);
      if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
      if (error == 0 && (events & (EPOLLERR | EPOLLHUP)) != 0) error = ECONNREFUSED;
      if (error != 0) {
        close(c->fd);
        c->fd = -1;
        c->connect_errno = error;
        Connect(c);  // the next address, if any
        return;
      }
      if ((events & EPOLLOUT) == 0) return;
      connections++;
      c->state = Conn::State::kSending;
      c->last_progress = Clock::now();
      Send(c);
      return;
    }
    case Conn::State::kSending:
      if ((events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0) Send(c);
      return;
    case Conn::State::kHead:
    case Conn::State::kBody:
      if (readable) Receive(c, (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
      return;
  }
}

void HttpEngine::Impl::Send(Conn* c) {
  while (c->out_sent < c->out.size()) {
    const ssize_t n = ::send(c->fd, c->out.data() + c->out_sent,
                             c->out.size() - c->out_sent, MSG_NOSIGNAL);
    if (n > 0) {
      c->out_sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT resumes
    const int error = n < 0 ? errno : EPIPE;
    if (c->reused && !c->resent) {
      Reopen(c);
      return;
    }
    Fail(c, CURLE_SEND_ERROR,
         std::string("sending the request failed: ") + std::strerror(error));
    return;
  }
  c->state = Conn::State::kHead;
  c->last_progress = Clock::now();
  Receive(c, false);  // edge-triggered: a reply already queued brings no new edge
}

void HttpEngine::Impl::Receive(Conn* c, bool peer_closing) {
  for (;;) {
    size_t want = kStagingBytes;
    if (c->state == Conn::State::kBody && !c->response.chunked && !c->until_close) {
      want = static_cast<size_t>(
          std::min<int64_t>(static_cast<int64_t>(want), c->body_left));
    }
    const ssize_t n = ::recv(c->fd, staging, want, 0);
    if (n > 0) {
      c->last_progress = Clock::now();
      if (!OnBytes(c, staging, static_cast<size_t>(n))) return;
      // A short read drained the socket: more bytes (or the peer's close) bring a new
      // edge, so skip the read that would only say EAGAIN.
      if (static_cast<size_t>(n) < want && !peer_closing) return;
      continue;
    }
    if (n == 0) {
      OnClosed(c, 0);
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    OnClosed(c, errno);
    return;
  }
}

bool HttpEngine::Impl::OnBytes(Conn* c, const uint8_t* p, size_t n) {
  Job* j = c->job;
  if (!c->got_byte) {
    c->got_byte = true;
    const double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - j->attempt_started)
            .count();
    std::lock_guard lock(metrics_mutex);
    ttfb[Bucket(ms)]++;
  }
  if (c->state == Conn::State::kBody) return OnBodyBytes(c, p, n);
  // The head: usually whole in the first read, then parsed where it lies.
  const auto* chars = reinterpret_cast<const char*>(p);
  if (c->head.empty()) {
    const size_t end = FindHeadEnd(std::string_view(chars, n));
    if (end != std::string_view::npos && end <= kMaxHeadBytes) {
      return OnHead(c, std::string_view(chars, end), p + end, n - end);
    }
    if (n > kMaxHeadBytes)
      return Fail(c, CURLE_WEIRD_SERVER_REPLY, "response head larger than 64 KiB");
    c->head.assign(chars, n);
    return true;
  }
  c->head.append(chars, n);
  const size_t end = FindHeadEnd(c->head);
  if (end == std::string::npos || end > kMaxHeadBytes) {
    if (c->head.size() > kMaxHeadBytes) {
      return Fail(c, CURLE_WEIRD_SERVER_REPLY, "response head larger than 64 KiB");
    }
    return true;
  }
  std::string held;  // OnHead may end the connection: keep the bytes out of it
  held.swap(c->head);
  const auto* rest = reinterpret_cast<const uint8_t*>(held.data()) + end;
  return OnHead(c, std::string_view(held.data(), end), rest, held.size() - end);
}

bool HttpEngine::Impl::OnHead(Conn* c, std::string_view head, const uint8_t* rest,
                              size_t rest_n) {
  Job* j = c->job;
  ForgetHeaders(j);
  Status st = ParseResponseHead(head, &c->response,
                                [j](std::string_view name, std::string_view value) {
                                  ApplyHeader(j, name, value);
                                });
  if (!st.ok()) return Fail(c, CURLE_WEIRD_SERVER_REPLY, st.message());
  const int code = c->response.status;
  if (code == 101)
    return Fail(c, CURLE_WEIRD_SERVER_REPLY, "unexpected 101 Switching Protocols");
  if (code <
      200) {  // an interim reply (100 Continue, 103 Early Hints): the real one follows
    if (rest_n == 0) return true;
    std::string again(reinterpret_cast<const char*>(rest), rest_n);
    return OnBytes(c, reinterpret_cast<const uint8_t*>(again.data()), again.size());
  }
  j->status = code;
  c->state = Conn::State::kBody;
  if (c->response.chunked) {
    j->content_length = -1;
  } else if (code == 204 || code == 304) {
    c->body_left = 0;
    j->content_length = 0;
  } else if (c->response.content_length >= 0) {
    c->body_left = c->response.content_length;
  } else {
    c->until_close = true;
  }
  if (code >= 200 && code < 300 && j->content_length > options.max_object_bytes) {
    j->too_large = true;
    return Fail(c, CURLE_WRITE_ERROR, "object larger than max_object_bytes");
  }
  if (!c->response.chunked && !c->until_close && c->body_left == 0) {
    if (rest_n > 0) c->broken = true;  // bytes nobody asked for
    return Done(c);
  }
  return rest_n == 0 ? true : OnBodyBytes(c, rest, rest_n);
}

bool HttpEngine::Impl::OnBodyBytes(Conn* c, const uint8_t* p, size_t n) {
  Job* j = c->job;
  if (c->response.chunked) {
    Result<size_t> used = c->chunks.Feed(
        p, n, [&](const uint8_t* data, size_t len) { return TakeBody(j, data, len); });
    if (!used.ok()) return Fail(c, CURLE_WEIRD_SERVER_REPLY, used.status().message());
    if (j->too_large)
      return Fail(c, CURLE_WRITE_ERROR, "object larger than max_object_bytes");
    if (!c->chunks.done()) return true;
    if (*used < n) c->broken = true;
    return Done(c);
  }
  if (c->until_close) {
    return TakeBody(j, p, n)
               ? true
               : Fail(c, CURLE_WRITE_ERROR, "object larger than max_object_bytes");
  }
  const size_t take =
      static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(n), c->body_left));
  if (!TakeBody(j, p, take))
    return Fail(c, CURLE_WRITE_ERROR, "object larger than max_object_bytes");
  c->body_left -= static_cast<int64_t>(take);
  if (c->body_left > 0) return true;
  if (take < n) c->broken = true;
  return Done(c);
}

bool HttpEngine::Impl::OnClosed(Conn* c, int error) {
  if (c->state == Conn::State::kBody && c->until_close && error == 0) {
    c->broken = true;
    return Done(c);  // the close is the end of this body
  }
  // A keep-alive connection the server had already closed: libcurl sends the request
  // again on a new connection once, and so do we. Nothing of a reply had arrived.
  if (c->reused && !c->got_byte && !c->resent) return Reopen(c);
  const std::string why =
      error != 0 ? std::string("connection reset (") + std::strerror(error) + ")"
                 : std::string("connection closed");
  if (!c->got_byte) {
    return Fail(c, error != 0 ? CURLE_RECV_ERROR : CURLE_GOT_NOTHING,
                why + " before any reply");
  }
  if (c->state == Conn::State::kHead)
    return Fail(c, CURLE_RECV_ERROR, why + " inside the reply's head");
  if (error != 0) return Fail(c, CURLE_RECV_ERROR, why + " inside the body");
  return Fail(
      c, CURLE_PARTIAL_FILE,
      why + " with " + std::to_string(c->body_left) + " bytes of the body missing");
}

bool HttpEngine::Impl::Reopen(Conn* c) {
  close(c->fd);
  c->fd = -1;
  c->reused = false;
  c->resent = true;
  c->out_sent = 0;
  c->head.clear();
  c->got_byte = false;
  c->last_progress = Clock::now();
  if (c->addresses.empty()) {
    Resolve(c);
  } else {
    c->connect_started = c->last_progress;
    c->next_address = 0;
    Connect(c);
  }
  return false;
}

bool HttpEngine::Impl::Done(Conn* c) {
  Job* j = c->job;
  c->job = nullptr;
  j->conn = nullptr;
  if (!c->broken && !c->response.close && !c->until_close &&
      idle_total < static_cast<size_t>(options.max_in_flight)) {
    c->state = Conn::State::kIdle;
    idle_conns[c->key].push_back(c);
    idle_total++;
  } else {
    CloseConn(c);
  }
  FinishAttempt(j, CURLE_OK);
  return false;
}

bool HttpEngine::Impl::Fail(Conn* c, CURLcode code, const std::string& message) {
  Job* j = c->job;
  if (c->state == Conn::State::kResolving) {
    auto it = dns_waiting.find(c->key);
    if (it != dns_waiting.end()) {
      std::erase(it->second, c);
    }
  }
  std::snprintf(j->curl_error, sizeof(j->curl_error), "%s", message.c_str());
  c->job = nullptr;
  j->conn = nullptr;
  CloseConn(c);
  FinishAttempt(j, code);
  return false;
}

void HttpEngine::Impl::CloseConn(Conn* c) {
  if (c->fd >= 0) close(c->fd);  // closing also takes it out of the epoll set
  delete c;
}

void HttpEngine::Impl::DropIdle(Conn* c) {
  auto it = idle_conns.find(c->key);
  if (it != idle_conns.end()) {
    std::erase(it->second, c);
    if (it->second.empty()) idle_conns.erase(it);
  }
  idle_total--;
  CloseConn(c);
}

void HttpEngine::Impl::Sweep(Clock::time_point now) {
  using Seconds = std::chrono::duration<double>;
  std::vector<std::pair<Conn*, std::string>> expired;
  for (Job* j : active) {
    Conn* c = j->conn;
    if (c == nullptr) continue;
    const double running = Seconds(now - j->attempt_started).count();
    const double quiet = Seconds(now - c->last_progress).count();
    char why[160];
    if (c->state == Conn::State::kResolving || c->state == Conn::State::kConnecting) {
      // Timed from this connect, which for a stale kept connection's re-send starts
      // later than the attempt.
      const double connecting = Seconds(now - c->connect_started).count();
      if (connecting < options.connect_timeout_s && running < options.total_timeout_s) {
        continue;
      }
      std::snprintf(
          why, sizeof(why), "connecting timed out after %.1f s (%s)", connecting,
          connecting >= options.connect_timeout_s ? "connect_timeout" : "total_timeout");
    } else if (quiet >= options.stall_timeout_s) {
      std::snprintf(why, sizeof(why), "no data for %.1f s (stall_timeout)", quiet);
    } else if (running >= options.total_timeout_s) {
      std::snprintf(why, sizeof(why), "the attempt took over %.1f s (total_timeout)",
                    options.total_timeout_s);
    } else {
      continue;
    }
    expired.emplace_back(c, why);
  }
  for (auto& [c, why] : expired) Fail(c, CURLE_OPERATION_TIMEDOUT, why);
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
  // The last error's reason, and the transport's own words when there are some.
  const std::string last =
      why.reason +
      (job->curl_error[0] != '\0' ? std::string(" (") + job->curl_error + ")" : "");
  if (job->attempt >= options.retry.max_attempts) {
    CountError("max_attempts");
    Complete(std::move(job),
             Describe(*job, StatusCode::kUnavailable,
                      (why.retry_class == RetryClass::kThrottle ? "throttled: " : "") +
                          std::string("gave up after ") + std::to_string(job->attempt) +
                          " attempts (max attempts reached); last error " + last));
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
                          last + " on attempt " + std::to_string(job->attempt)));
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
  if (job->easy != nullptr) {
    curl_off_t ttfb_us = 0;
    long opened = 0;
    curl_easy_getinfo(job->easy, CURLINFO_STARTTRANSFER_TIME_T, &ttfb_us);
    curl_easy_getinfo(job->easy, CURLINFO_NUM_CONNECTS, &opened);
    connections += static_cast<uint64_t>(std::max(0L, opened));
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
  }  // the own client counted its time to first byte when the byte came

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
      Body slice(job->data.begin() + start, job->data.begin() + end);
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
    // The own client's timeouts are swept while anything is in flight.
    if (in_flight.load(std::memory_order_relaxed) > 0) {
      const auto wait =
          std::chrono::ceil<std::chrono::milliseconds>(next_sweep - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(wait, 0, timeout_ms));
    }
    epoll_event events[64];
    const int n = epoll_wait(epoll_fd, events, 64, timeout_ms);
    int running = 0;
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag & kConnTag) {
        OnConnEvent(reinterpret_cast<Conn*>(tag & ~kConnTag), events[i].events);
        continue;
      }
      const int fd = static_cast<int>(tag);
      if (fd == wake_fd) {
        uint64_t count;
        [[maybe_unused]] const ssize_t r = read(wake_fd, &count, sizeof(count));
        if (resolver != nullptr) OnDnsAnswers();
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
    if (const auto now = Clock::now(); now >= next_sweep) {
      next_sweep = now + kSweepEvery;
      Sweep(now);
    }
  }
  // Stopping: everything not finished is cancelled.
  std::vector<std::unique_ptr<Job>> rest;
  for (Job* j : active) {
    if (j->easy != nullptr) {
      curl_multi_remove_handle(multi, j->easy);
      curl_easy_cleanup(j->easy);
      curl_slist_free_all(j->headers);
    }
    if (j->conn != nullptr) CloseConn(j->conn);
    j->easy = nullptr;
    j->headers = nullptr;
    j->conn = nullptr;
    in_flight--;
    rest.emplace_back(j);
  }
  active.clear();
  dns_waiting.clear();  // their connections were closed above
  for (auto& [key, conns] : idle_conns) {
    for (Conn* c : conns) CloseConn(c);
  }
  idle_conns.clear();
  idle_total = 0;
  if (resolver != nullptr) {
    {
      std::lock_guard lock(resolver->mutex);
      resolver->stop = true;
    }
    resolver->cv.notify_all();
  }
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
  if (!s3.credentials.empty()) {
    STOKER_ASSIGN_OR_RETURN(
        impl->signer,
        SigV4Signer::Make(s3.credentials.access_key_id, s3.credentials.secret_access_key,
                          s3.region, "s3"));
  }
  impl->staging = static_cast<uint8_t*>(std::aligned_alloc(64, kStagingBytes));
  if (impl->staging == nullptr)
    return status::Internal("could not allocate the IO buffer");
  for (const std::string& entry : options.resolve) {
    impl->resolve = curl_slist_append(impl->resolve, entry.c_str());
    // "host:port:address" (the address may be bracketed IPv6): the own client's pins.
    const size_t first = entry.find(':');
    const size_t second = first == std::string::npos ? first : entry.find(':', first + 1);
    int64_t port = 0;
    sockaddr_storage address;
    std::string host, text;
    if (second != std::string::npos) {
      host = entry.substr(0, first);
      text = entry.substr(second + 1);
      if (text.size() > 2 && text.front() == '[' && text.back() == ']') {
        text = text.substr(1, text.size() - 2);
      }
    }
    if (second == std::string::npos ||
        !ParseInt(std::string_view(entry).substr(first + 1, second - first - 1), &port) ||
        port <= 0 || port > 65535 || host.empty() ||
        !NumericAddress(text, static_cast<int>(port), &address)) {
      return status::InvalidArgument("resolve entry '", entry,
                                     "' is not host:port:address (a numeric address)");
    }
    impl->pinned[host + ":" + std::to_string(port)] = address;
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
  m.connections = impl_->connections;
  m.bytes_in_flight = impl_->bytes_in_flight;
  std::lock_guard lock(impl_->metrics_mutex);
  m.retries_by_reason = impl_->retries_by_reason;
  m.errors_by_reason = impl_->errors_by_reason;
  m.ttfb_ms = impl_->ttfb;
  m.total_ms = impl_->total;
  return m;
}

}  // namespace stoker::io
