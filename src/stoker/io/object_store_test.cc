#include "stoker/io/object_store.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace stoker::io {
namespace {

EnvLookup NoEnv() {
  return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}

// A loopback port with nothing listening: bound, never listened on, then closed.
int DeadPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A scripted HTTP/1.1 server on a loopback port: the i-th connection gets the i-th
// reply (after its request has been read, and recorded), then is closed. Enough to
// drive the engine's response handling under the sanitizers without Python. With
// `piece` > 0 each reply goes out `piece` bytes at a time, a millisecond apart, so the
// client sees heads, chunk sizes and bodies split across many reads.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> replies, size_t piece = 0)
      : replies_(std::move(replies)), piece_(piece) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    ::listen(fd_, 16);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  std::vector<std::string> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  void Serve() {
    for (const std::string& reply : replies_) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(request);
      }
      if (piece_ == 0) {
        ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      } else {
        const int one = 1;
        ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        for (size_t at = 0; at < reply.size(); at += piece_) {
          ::send(c, reply.data() + at, std::min(piece_, reply.size() - at), MSG_NOSIGNAL);
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
      ::close(c);
    }
  }
  std::vector<std::string> replies_;
  size_t piece_ = 0;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<std::string> requests_;
};

class ObjectStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stoker_store_XXXXXX";
    base_ = ::mkdtemp(tmpl);
    root_ = base_ + "/images";
    std::filesystem::create_directories(root_);
    std::ofstream(root_ + "/a.bin") << "0123456789";
    std::ofstream(base_ + "/outside.txt") << "secret";
    std::filesystem::create_symlink(base_ + "/outside.txt", root_ + "/link.bin");
    options_.policy.local_root = root_;
    options_.retry.transient_base_s = 0.001;
    options_.retry.throttle_base_s = 0.001;
    options_.connect_timeout_s = 2;
  }
  void TearDown() override { std::filesystem::remove_all(base_); }
  std::shared_ptr<ObjectStore> Make() {
    auto store = ObjectStore::Make(options_, NoEnv());
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return *store;
  }
  std::string base_, root_;
  ObjectStoreOptions options_;
};

// The tests that talk HTTP run against both clients: plain http:// normally goes
// through Stoker's own HTTP/1.1 client, and HttpClient::kCurl sends it through libcurl
// (what https:// always uses).
class ObjectStoreHttpTest : public ObjectStoreTest,
                            public ::testing::WithParamInterface<HttpClient> {
 protected:
  void SetUp() override {
    ObjectStoreTest::SetUp();
    options_.http_client = GetParam();
  }
};
INSTANTIATE_TEST_SUITE_P(Clients, ObjectStoreHttpTest,
                         ::testing::Values(HttpClient::kAuto, HttpClient::kCurl),
                         [](const ::testing::TestParamInfo<HttpClient>& info) {
                           return info.param == HttpClient::kCurl ? "Curl" : "Own";
                         });

TEST_F(ObjectStoreTest, LocalWholeAndRange) {
  auto store = Make();
  Body out;
  ObjectInfo info;
  ASSERT_TRUE(store->Read("a.bin", {}, &out, &info).ok());
  EXPECT_EQ(std::string(out.begin(), out.end()), "0123456789");
  EXPECT_EQ(info.size, 10);
  ASSERT_TRUE(store->Read("file://" + root_ + "/a.bin", {3, 4}, &out).ok());
  EXPECT_EQ(std::string(out.begin(), out.end()), "3456");
  ASSERT_TRUE(store->Read("a.bin", {8, 100}, &out).ok());
  EXPECT_EQ(std::string(out.begin(), out.end()), "89");
  ASSERT_TRUE(store->Read("a.bin", {4, 0}, &out).ok());
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(store->Read("http://93.184.216.34/never-contacted", {4, 0}, &out).ok());
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(store->Read("missing.bin", {}, &out).code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Read("a.bin", {-1, 2}, &out).code(), StatusCode::kInvalidArgument);
  const IoMetrics m = store->Metrics();
  EXPECT_EQ(m.reads_ok, 5u);
  EXPECT_EQ(m.reads_failed, 1u);
  EXPECT_EQ(m.bytes, 16u);
  EXPECT_EQ(m.requests, 0u);
}

TEST_F(ObjectStoreTest, LocalEscapesRefused) {
  auto store = Make();
  Body out;
  Status link = store->Read("link.bin", {}, &out);
  EXPECT_NE(link.message().find("(rule: symlink escape)"), std::string::npos);
  Status dots = store->Read("../outside.txt", {}, &out);
  EXPECT_NE(dots.message().find("(rule: '..' escape)"), std::string::npos);
  Status passwd = store->Read("file:///etc/passwd", {}, &out);
  EXPECT_NE(passwd.message().find("(rule: outside image root)"), std::string::npos);
}

TEST_F(ObjectStoreTest, AsyncSubmitDeliversEveryCallbackOnce) {
  auto store = Make();
  std::mutex mutex;
  std::condition_variable cv;
  int done = 0, ok = 0;
  constexpr int kReads = 50;
  for (int i = 0; i < kReads; ++i) {
    store->Submit(i % 5 == 0 ? "nope.bin" : "a.bin", {static_cast<int64_t>(i % 10), 1},
                  [&, i](Status st, Body data, ObjectInfo) {
                    std::lock_guard lock(mutex);
                    if (st.ok() && data.size() == 1 && data[0] == '0' + i % 10) ++ok;
                    ++done;
                    cv.notify_all();
                  });
  }
  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return done == kReads; });
  EXPECT_EQ(ok, kReads - kReads / 5);
}

TEST_P(ObjectStoreHttpTest, ResolvedLoopbackRefusedAtConnectTime) {
  // The name is not an address, so only the connect-time check can catch it.
  const int port = DeadPort();
  options_.resolve = {"innocent.example:" + std::to_string(port) + ":127.0.0.1"};
  auto store = Make();
  Body out;
  Status st =
      store->Read("http://innocent.example:" + std::to_string(port) + "/x", {}, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("(rule: loopback address)"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("resolves to 127.0.0.1"), std::string::npos);
  EXPECT_EQ(store->Metrics().retries, 0u);  // a policy refusal is never retried
}

TEST_P(ObjectStoreHttpTest, ConnectionRefusedRetriedUpToMaxAttempts) {
  const int port = DeadPort();
  options_.policy.allow_private_addresses = true;
  options_.retry.max_attempts = 3;
  auto store = Make();
  Body out;
  ObjectInfo info;
  Status st =
      store->Read("http://127.0.0.1:" + std::to_string(port) + "/x?X-Amz-Signature=S", {},
                  &out, &info);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("max attempts reached"), std::string::npos);
  EXPECT_EQ(st.message().find("X-Amz-Signature"), std::string::npos);  // redacted
  EXPECT_EQ(info.attempts, 3);
  const IoMetrics m = store->Metrics();
  EXPECT_EQ(m.requests, 3u);
  EXPECT_EQ(m.retries, 2u);
  EXPECT_EQ(m.retries_by_reason.at("connect_failed"), 2u);
  EXPECT_EQ(m.in_flight, 0);
}

TEST_P(ObjectStoreHttpTest, BudgetExhaustionFailsFast) {
  const int port = DeadPort();
  options_.policy.allow_private_addresses = true;
  options_.retry.max_attempts = 100;
  options_.retry.budget_tokens = 14 * 3;  // three transient retries in all
  auto store = Make();
  Body out;
  Status st = store->Read("http://127.0.0.1:" + std::to_string(port) + "/x", {}, &out);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("retry budget exhausted"), std::string::npos)
      << st.message();
  EXPECT_EQ(store->Metrics().requests, 4u);
  EXPECT_EQ(store->Metrics().budget_exhausted, 1u);
}

TEST_F(ObjectStoreTest, InvalidOptionsAndSecretsNotInToString) {
  options_.max_in_flight = 0;
  EXPECT_FALSE(ObjectStore::Make(options_, NoEnv()).ok());
  options_.max_in_flight = 4;
  options_.s3.access_key_id = "AKIDEXAMPLE12345678";
  options_.s3.secret_access_key = "CANARY-secret-value";
  options_.s3.session_token = "CANARY-token-value";
  auto store = Make();
  EXPECT_EQ(store->ToString().find("CANARY"), std::string::npos) << store->ToString();
}

TEST_P(ObjectStoreHttpTest, DestroyWhileInFlightCancels) {
  const int port = DeadPort();
  options_.policy.allow_private_addresses = true;
  options_.retry.max_attempts = 50;
  options_.retry.transient_base_s = 5;  // long backoff: still waiting when destroyed
  std::atomic<int> cancelled{0};
  {
    auto store = Make();
    for (int i = 0; i < 4; ++i) {
      store->Submit("http://127.0.0.1:" + std::to_string(port) + "/x", {},
                    [&](Status st, Body, ObjectInfo) {
                      if (st.code() == StatusCode::kCancelled) ++cancelled;
                    });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(cancelled.load(), 4);
}

TEST_P(ObjectStoreHttpTest, ShortBodyResumesWithRangeAndIfMatch) {
  const std::string body(1000, 'x');
  ScriptedServer server({
      // Content-Length says 1000, 400 arrive, then the connection closes.
      "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nETag: \"e1\"\r\n\r\n" +
          body.substr(0, 400),
      "HTTP/1.1 503 Slow Down\r\nContent-Length: 44\r\n\r\n"
      "<Error><Code>SlowDown</Code></Error>        ",
      "HTTP/1.1 206 Partial Content\r\nContent-Length: 600\r\nETag: \"e1\"\r\n"
      "Content-Range: bytes 400-999/1000\r\n\r\n" +
          body.substr(400),
  });
  options_.policy.allow_private_addresses = true;
  auto store = Make();
  Body out;
  ObjectInfo info;
  Status st = store->Read("http://127.0.0.1:" + std::to_string(server.port()) + "/obj",
                          {}, &out, &info);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(std::string(out.begin(), out.end()), body);
  EXPECT_EQ(info.size, 1000);
  EXPECT_EQ(info.etag, "\"e1\"");
  EXPECT_EQ(info.attempts, 3);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].find("Range:"), std::string::npos);
  for (int i : {1, 2}) {
    EXPECT_NE(requests[i].find("Range: bytes=400-\r\n"), std::string::npos)
        << requests[i];
    EXPECT_NE(requests[i].find("If-Match: \"e1\"\r\n"), std::string::npos);
  }
  const IoMetrics m = store->Metrics();
  EXPECT_EQ(m.retries_by_reason.at("short_body"), 1u);
  EXPECT_EQ(m.retries_by_reason.at("http_503_SlowDown"), 1u);
  EXPECT_EQ(m.resumed, 2u);
  EXPECT_EQ(m.bytes_in_flight, 0);
}

TEST_P(ObjectStoreHttpTest, ChangedObjectFailsAndServerIgnoringRangeIsSliced) {
  ScriptedServer server({
      "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nETag: \"v1\"\r\n\r\n01234",
      "HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\n\r\n",
      // A server without range support answers 200 with everything.
      "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789",
  });
  options_.policy.allow_private_addresses = true;
  auto store = Make();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/obj";
  Body out;
  Status changed = store->Read(url, {}, &out);
  EXPECT_EQ(changed.code(), StatusCode::kIOError);
  EXPECT_NE(changed.message().find("changed while it was read"), std::string::npos);
  ASSERT_TRUE(store->Read(url, {3, 4}, &out).ok());
  EXPECT_EQ(std::string(out.begin(), out.end()), "3456");
}

TEST_P(ObjectStoreHttpTest, RetryAfterHintStretchesTheBackoffBoundedAndInvalidIgnored) {
  const std::string slow =
      "HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\nx-amz-retry-after: ";
  ScriptedServer server({
      slow + "300\r\n\r\n",
      slow + "abc\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
  });
  options_.policy.allow_private_addresses = true;
  auto store = Make();
  Body out;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      store->Read("http://127.0.0.1:" + std::to_string(server.port()) + "/o", {}, &out)
          .ok());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(seconds, 0.3);  // the hint, not our 1 ms base
  EXPECT_LT(seconds, 3.0);  // and the invalid one added nothing
  EXPECT_EQ(store->Metrics().retries, 2u);
}

TEST_P(ObjectStoreHttpTest, TooLargeBodyAndRedirectRefused) {
  ScriptedServer server({
      "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'z'),
      "HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/\r\n"
      "Content-Length: 0\r\n\r\n",
  });
  options_.policy.allow_private_addresses = true;
  options_.max_object_bytes = 50;
  auto store = Make();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/obj";
  Body out;
  EXPECT_EQ(store->Read(url, {}, &out).code(), StatusCode::kLimitExceeded);
  Status redirect = store->Read(url, {}, &out);
  EXPECT_NE(redirect.message().find("(rule: redirects)"), std::string::npos);
}

TEST_P(ObjectStoreHttpTest, FramingSplitAcrossManyReads) {
  const std::string body = "The quick brown fox jumps over the lazy dog.";
  std::string chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (size_t at = 0; at < body.size(); at += 10) {
    const std::string part = body.substr(at, 10);
    char size[16];
    std::snprintf(size, sizeof(size), "%zx;x=y\r\n", part.size());
    chunked += size + part + "\r\n";
  }
  chunked += "0\r\nTrailer: t\r\n\r\n";
  ScriptedServer server(
      {
          chunked,
          "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\nX-Long: " + std::string(3000, 'h') +
              "\r\n\r\n" + body,
          "HTTP/1.0 200 OK\r\nServer: old\r\n\r\n" + body,
          "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
      },
      /*piece=*/7);
  options_.policy.allow_private_addresses = true;
  options_.retry.max_attempts = 1;
  auto store = Make();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/o";
  for (const char* what : {"chunked", "after 100 Continue", "HTTP/1.0 until close"}) {
    Body out;
    Status st = store->Read(url, {}, &out);
    ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
    EXPECT_EQ(std::string(out.begin(), out.end()), body) << what;
  }
  // Two Content-Lengths that disagree: the own client refuses the reply (RFC 9112);
  // libcurl 7.88 takes one of them.
  Body out;
  Status conflicting = store->Read(url, {}, &out);
  if (GetParam() == HttpClient::kAuto) {
    EXPECT_NE(conflicting.message().find("Content-Length"), std::string::npos)
        << conflicting.ToString();
  }
}

}  // namespace
}  // namespace stoker::io
