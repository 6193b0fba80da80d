#include "stoker/io/http1.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace stoker::io {
namespace {

Status Parse(std::string_view head, ResponseHead* out,
             std::map<std::string, std::string>* headers = nullptr) {
  return ParseResponseHead(head, out, [&](std::string_view name, std::string_view value) {
    if (headers != nullptr) (*headers)[std::string(name)] = std::string(value);
  });
}

TEST(Http1Test, FindsTheEndOfTheHead) {
  EXPECT_EQ(FindHeadEnd("HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody"), 25u);
  EXPECT_EQ(FindHeadEnd("HTTP/1.1 200 OK\nA: b\n\nbody"), 22u);
  EXPECT_EQ(FindHeadEnd("HTTP/1.1 200 OK\r\nA: b\r\n\r"), std::string_view::npos);
  EXPECT_EQ(FindHeadEnd("HTTP/1.1 200 OK\r\n"), std::string_view::npos);
  EXPECT_EQ(FindHeadEnd(""), std::string_view::npos);
}

TEST(Http1Test, ParsesStatusFramingAndHeaders) {
  ResponseHead h;
  std::map<std::string, std::string> headers;
  ASSERT_TRUE(Parse("HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\n"
                    "ETag:  \"abc\" \r\ncontent-range: bytes 0-9/100\r\n\r\n",
                    &h, &headers)
                  .ok());
  EXPECT_EQ(h.status, 206);
  EXPECT_EQ(h.content_length, 10);
  EXPECT_FALSE(h.chunked);
  EXPECT_FALSE(h.close);
  EXPECT_EQ(headers["ETag"], "\"abc\"");
  EXPECT_EQ(headers["content-range"], "bytes 0-9/100");

  ASSERT_TRUE(Parse("HTTP/1.1 200\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n", &h).ok());
  EXPECT_TRUE(h.chunked);
  EXPECT_EQ(h.content_length, -1);
  ASSERT_TRUE(Parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", &h).ok());
  EXPECT_FALSE(h.chunked);
  EXPECT_TRUE(h.close);  // a body that runs to the close
  // Both framings: chunked wins and the connection is not reused.
  ASSERT_TRUE(
      Parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            &h)
          .ok());
  EXPECT_TRUE(h.chunked);
  EXPECT_EQ(h.content_length, -1);
  EXPECT_TRUE(h.close);
}

TEST(Http1Test, ConnectionReuseFollowsVersionAndConnectionHeader) {
  ResponseHead h;
  ASSERT_TRUE(Parse("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\n\r\n", &h).ok());
  EXPECT_TRUE(h.close);
  ASSERT_TRUE(Parse("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", &h).ok());
  EXPECT_TRUE(h.close);
  ASSERT_TRUE(Parse("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n", &h).ok());
  EXPECT_FALSE(h.close);
}

TEST(Http1Test, RefusesMalformedHeads) {
  ResponseHead h;
  for (const char* bad : {
           "HTTP/2 200 OK\r\n\r\n",                          // not HTTP/1.x
           "HTTP/1.1 2x0 OK\r\n\r\n",                        // status digits
           "HTTP/1.1 099 Low\r\n\r\n",                       // below 100
           "HTTP/1.1 2000 OK\r\n\r\n",                       // four digits
           "ICY 200 OK\r\n\r\n",                             // another protocol
           "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",  // negative
           "HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
           "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
           "HTTP/1.1 200 OK\r\n: no name\r\n\r\n",
           "HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n",
       }) {
    EXPECT_FALSE(Parse(bad, &h).ok()) << bad;
  }
  // The same Content-Length twice is allowed.
  EXPECT_TRUE(
      Parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n", &h)
          .ok());
}

// Feeds `wire` to a decoder in pieces of `piece` bytes; returns the body, or the error.
Result<std::string> Dechunk(std::string_view wire, size_t piece, size_t* used_total) {
  ChunkedDecoder d;
  std::string body;
  size_t used = 0;
  while (used < wire.size() && !d.done()) {
    const size_t n = std::min(piece, wire.size() - used);
    Result<size_t> r = d.Feed(reinterpret_cast<const uint8_t*>(wire.data()) + used, n,
                              [&](const uint8_t* p, size_t len) {
                                body.append(reinterpret_cast<const char*>(p), len);
                                return true;
                              });
    if (!r.ok()) return r.status();
    used += *r;
    if (*r < n && !d.done()) return status::Internal("stopped early");
  }
  if (used_total != nullptr) *used_total = used;
  if (!d.done()) return status::IOError("incomplete");
  return body;
}

TEST(Http1Test, DechunksInPiecesOfEverySize) {
  const std::string wire =
      "5\r\nhello\r\n1;name=value\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  for (size_t piece = 1; piece <= wire.size(); ++piece) {
    size_t used = 0;
    Result<std::string> body = Dechunk(wire, piece, &used);
    ASSERT_TRUE(body.ok()) << piece << ": " << body.status().ToString();
    EXPECT_EQ(*body, "hello 0123456789") << piece;
    EXPECT_EQ(used, wire.size() - 4) << piece;  // stops before what follows the body
  }
  // Bare LFs and upper-case hex.
  Result<std::string> lf = Dechunk("B\nhello world\n0\n\n", 3, nullptr);
  ASSERT_TRUE(lf.ok());
  EXPECT_EQ(*lf, "hello world");
}

TEST(Http1Test, RefusesMalformedChunks) {
  for (const char* bad : {
           "x\r\nhello\r\n0\r\n\r\n",  // not hex
           "\r\nhello\r\n0\r\n\r\n",   // no size
           "3\r\nhello\r\n0\r\n\r\n",  // data longer than its size
           "1234567890123456\r\n",     // size overflows
       }) {
    for (size_t piece : {size_t{1}, size_t{4}, size_t{64}}) {
      EXPECT_FALSE(Dechunk(bad, piece, nullptr).ok()) << bad << " in pieces of " << piece;
    }
  }
  std::string huge_trailer = "0\r\n";
  huge_trailer += "X: " + std::string(70 << 10, 'y') + "\r\n\r\n";
  EXPECT_FALSE(Dechunk(huge_trailer, 4096, nullptr).ok());
}

}  // namespace
}  // namespace stoker::io
