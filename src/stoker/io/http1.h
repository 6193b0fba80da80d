// HTTP/1.1 response framing for the engine's own client (plain http://).
//
// Pure functions over bytes, no sockets: the engine (http_engine.cc) owns the
// connections and feeds what it receives through these. Kept apart so the framing
// rules (RFC 9112) are unit-tested on their own, byte by byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "stoker/core/status.h"

namespace stoker::io {

// The offset just past the blank line that ends a response head (CRLF CRLF, or bare
// LF LF), or npos when `data` does not hold a whole head yet.
size_t FindHeadEnd(std::string_view data);

// Case-insensitive comparison of a header name with a lower-case one.
bool HeaderIs(std::string_view name, std::string_view lower);

// `v` without leading and trailing spaces and tabs (a header value's optional space).
std::string_view TrimSpaces(std::string_view v);

struct ResponseHead {
  int status = 0;
  int64_t content_length = -1;  // -1: the head gave none
  bool chunked = false;         // Transfer-Encoding ends in chunked
  bool close = false;           // the connection cannot carry another request
  bool http10 = false;
};

// Parses a whole response head (status line and header lines, through the blank line).
// Calls `on_header(name, value)` for each header (value without surrounding
// whitespace). Fails on a malformed status line or header line, an invalid
// Content-Length, or two Content-Lengths that disagree.
template <typename OnHeader>
Status ParseResponseHead(std::string_view head, ResponseHead* out, OnHeader&& on_header);

// Decodes a chunked body (RFC 9112 section 7.1) fed in pieces of any size. Chunk
// extensions and trailers are read and dropped.
class ChunkedDecoder {
 public:
  // Consumes bytes of `in` up to the end of the body, calling `sink(data, size)` with
  // the body's bytes (sink returns false to stop). Returns how many bytes of `in`
  // were consumed: all of them unless the body ended (done()) or sink stopped.
  template <typename Sink>
  Result<size_t> Feed(const uint8_t* in, size_t n, Sink&& sink);
  bool done() const { return state_ == State::kDone; }
  void Reset() { *this = ChunkedDecoder(); }

 private:
  enum class State { kSize, kExtension, kData, kDataCr, kDataLf, kTrailer, kDone };
  Result<size_t> Step(const uint8_t* in, size_t n, const uint8_t** data,
                      size_t* data_len);
  State state_ = State::kSize;
  uint64_t size_ = 0;  // of the chunk being read
  int digits_ = 0;
  uint64_t left_ = 0;  // bytes of the chunk's data still to come
  size_t line_ = 0;    // length of the trailer line being read
  size_t trailer_bytes_ = 0;
};

// --- Implementation of the templates ------------------------------------------------

namespace http1_detail {
Status ParseStatusLine(std::string_view line, ResponseHead* out);
// Applies the framing headers (Content-Length, Transfer-Encoding, Connection).
Status ApplyFraming(std::string_view name, std::string_view value, ResponseHead* out,
                    bool* keep_alive_seen);
}  // namespace http1_detail

template <typename OnHeader>
Status ParseResponseHead(std::string_view head, ResponseHead* out, OnHeader&& on_header) {
  *out = ResponseHead();
  bool first = true, keep_alive_seen = false;
  while (!head.empty()) {
    const size_t eol = head.find('\n');
    std::string_view line = head.substr(0, eol);
    head.remove_prefix(eol == std::string_view::npos ? head.size() : eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (first) {
      STOKER_RETURN_NOT_OK(http1_detail::ParseStatusLine(line, out));
      first = false;
      continue;
    }
    if (line.empty()) break;  // the blank line
    if (line.front() == ' ' || line.front() == '\t') {
      return status::IOError("malformed HTTP response: folded header line");
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return status::IOError("malformed HTTP response: header line without a name");
    }
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = TrimSpaces(line.substr(colon + 1));
    STOKER_RETURN_NOT_OK(http1_detail::ApplyFraming(name, value, out, &keep_alive_seen));
    on_header(name, value);
  }
  if (first) return status::IOError("malformed HTTP response: empty head");
  // HTTP/1.0 closes unless it asked to stay open. With both framings, chunked wins and
  // the connection is not trusted again (RFC 9112 section 6.3).
  if (out->http10 && !keep_alive_seen) out->close = true;
  if (out->chunked && out->content_length >= 0) {
    out->content_length = -1;
    out->close = true;
  }
  return Status::OK();
}

template <typename Sink>
Result<size_t> ChunkedDecoder::Feed(const uint8_t* in, size_t n, Sink&& sink) {
  size_t used = 0;
  while (used < n && state_ != State::kDone) {
    const uint8_t* data = nullptr;
    size_t data_len = 0;
    Result<size_t> step = Step(in + used, n - used, &data, &data_len);
    if (!step.ok()) return step.status();
    used += *step;
    if (data_len > 0 && !sink(data, data_len)) return used;
  }
  return used;
}

}  // namespace stoker::io
