// The least CPU a client can spend fetching the objects bench_io.py serves: `level`
// keep-alive HTTP/1.1 connections on one epoll thread, each GET answered into one hot
// 64-byte-aligned buffer and thrown away (no signing, no body buffers, no consumer).
// bench_io.py compiles and runs it next to Stoker, as the floor under every client's
// CPU figure on the machine at hand: what is left is the kernel's TCP receive path.
//
//   http_floor PORT BUCKET OBJECTS LEVEL   ->   prints "bytes wall_s cpu_s"
//
// Objects are /BUCKET/000000.bin, /BUCKET/000001.bin, ...; every reply must be a 200
// with a Content-Length (anything else exits non-zero).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct Conn {
  int fd = -1;
  bool in_body = false;
  std::string head;
  long long left = 0;
};

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

double CpuSeconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return r.ru_utime.tv_sec + r.ru_stime.tv_sec +
         1e-6 * (r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s PORT BUCKET OBJECTS LEVEL\n", argv[0]);
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const std::string bucket = argv[2];
  const int objects = std::atoi(argv[3]);
  const int level = std::atoi(argv[4]);
  alignas(64) static unsigned char sink[256 << 10];

  const int ep = epoll_create1(0);
  std::vector<Conn> conns(level);
  int next = 0, done = 0;
  long long bytes = 0;
  auto send_next = [&](Conn& c) {
    char request[256];
    const int n = std::snprintf(request, sizeof(request),
                                "GET /%s/%06d.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                                bucket.c_str(), next++);
    if (send(c.fd, request, n, MSG_NOSIGNAL) != n) Die("send");
    c.in_body = false;
    c.head.clear();
  };
  for (Conn& c : conns) {
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c.fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 &&
        errno != EINPROGRESS) {
      Die("connect");
    }
    const int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.ptr = &c;
    epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &event);
  }
  usleep(100000);  // the connections are up before the clock starts

  const double cpu0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (Conn& c : conns) {
    if (next < objects) send_next(c);
  }
  while (done < objects) {
    epoll_event events[64];
    const int n = epoll_wait(ep, events, 64, 5000);
    if (n == 0) {
      std::fprintf(stderr, "no progress for 5 s\n");
      return 1;
    }
    for (int i = 0; i < n; ++i) {
      Conn& c = *static_cast<Conn*>(events[i].data.ptr);
      for (;;) {
        const size_t want =
            c.in_body ? std::min<long long>(sizeof(sink), c.left) : sizeof(sink);
        const ssize_t got = recv(c.fd, sink, want, 0);
        if (got < 0 && errno == EAGAIN) break;
        if (got <= 0) Die("recv");
        if (!c.in_body) {
          // Only the head is kept: the body bytes that came with it are counted where
          // they lie, like the rest of the body.
          const size_t before = c.head.size();
          const std::string_view fresh(reinterpret_cast<char*>(sink), got);
          const size_t tail = fresh.find("\r\n\r\n");
          c.head.append(fresh.substr(0, tail == std::string_view::npos ? got : tail + 4));
          const size_t end = c.head.find("\r\n\r\n");
          if (end == std::string::npos) continue;
          const size_t length = c.head.find("Content-Length: ");
          if (c.head.compare(0, 12, "HTTP/1.1 200") != 0 || length == std::string::npos) {
            std::fprintf(stderr, "unexpected reply: %.60s\n", c.head.c_str());
            return 1;
          }
          const long long body_here = static_cast<long long>(got) - (end + 4 - before);
          c.left = std::atoll(c.head.c_str() + length + 16) - body_here;
          bytes += body_here;
          c.in_body = true;
        } else {
          c.left -= got;
          bytes += got;
        }
        if (c.left == 0) {
          ++done;
          if (next < objects)
            send_next(c);
          else
            break;
        }
      }
    }
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%lld %.6f %.6f\n", bytes, wall, CpuSeconds() - cpu0);
  return 0;
}
