#include "stoker/io/http1.h"

#include <algorithm>
#include <cstring>

namespace stoker::io {

namespace {
constexpr size_t kMaxTrailerBytes = 64 << 10;

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

int HexDigit(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Does the comma-separated list `value` contain `token` (case-insensitive)?
bool HasToken(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (HeaderIs(TrimSpaces(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}
}  // namespace

size_t FindHeadEnd(std::string_view data) {
  for (size_t i = data.find('\n'); i != std::string_view::npos;
       i = data.find('\n', i + 1)) {
    if (i + 1 < data.size() && data[i + 1] == '\n') return i + 2;
    if (i + 2 < data.size() && data[i + 1] == '\r' && data[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

bool HeaderIs(std::string_view name, std::string_view lower) {
  if (name.size() != lower.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (Lower(name[i]) != lower[i]) return false;
  }
  return true;
}

std::string_view TrimSpaces(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

namespace http1_detail {

Status ParseStatusLine(std::string_view line, ResponseHead* out) {
  // HTTP/1.x SP 3DIGIT [SP reason]
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[8] != ' ' ||
      (line.size() > 12 && line[12] != ' ')) {
    return status::IOError("malformed HTTP response: status line '",
                           line.substr(0, std::min<size_t>(line.size(), 40)), "'");
  }
  int code = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (line[i] < '0' || line[i] > '9') {
      return status::IOError("malformed HTTP response: status code '", line.substr(9, 3),
                             "'");
    }
    code = code * 10 + (line[i] - '0');
  }
  if (code < 100)
    return status::IOError("malformed HTTP response: status ", std::to_string(code));
  out->status = code;
  out->http10 = line[7] == '0';
  return Status::OK();
}

Status ApplyFraming(std::string_view name, std::string_view value, ResponseHead* out,
                    bool* keep_alive_seen) {
  if (HeaderIs(name, "content-length")) {
    if (value.empty() || value.size() > 18) {
      return status::IOError("malformed HTTP response: Content-Length '", value, "'");
    }
    int64_t length = 0;
    for (char c : value) {
      if (c < '0' || c > '9') {
        return status::IOError("malformed HTTP response: Content-Length '", value, "'");
      }
      length = length * 10 + (c - '0');
    }
    if (out->content_length >= 0 && out->content_length != length) {
      return status::IOError("malformed HTTP response: two different Content-Lengths");
    }
    out->content_length = length;
  } else if (HeaderIs(name, "transfer-encoding")) {
    // Only a final "chunked" frames the body; any other coding runs to the close.
    const size_t comma = value.rfind(',');
    const std::string_view last =
        TrimSpaces(comma == std::string_view::npos ? value : value.substr(comma + 1));
    out->chunked = HeaderIs(last, "chunked");
    if (!out->chunked) out->close = true;
  } else if (HeaderIs(name, "connection")) {
    if (HasToken(value, "close")) out->close = true;
    if (HasToken(value, "keep-alive")) *keep_alive_seen = true;
  }
  return Status::OK();
}

}  // namespace http1_detail

Result<size_t> ChunkedDecoder::Step(const uint8_t* in, size_t n, const uint8_t** data,
                                    size_t* data_len) {
  size_t i = 0;
  switch (state_) {
    case State::kSize:
      for (; i < n; ++i) {
        const uint8_t c = in[i];
        const int d = HexDigit(c);
        if (d >= 0) {
          if (++digits_ > 15) return status::IOError("chunked body: chunk size too long");
          size_ = size_ * 16 + static_cast<uint64_t>(d);
          continue;
        }
        if (digits_ == 0) return status::IOError("chunked body: missing chunk size");
        if (c == '\n') {
          ++i;
          digits_ = 0;
          if (size_ == 0) {
            state_ = State::kTrailer;
          } else {
            left_ = size_;
            state_ = State::kData;
          }
          size_ = 0;
          return i;
        }
        if (c == ';' || c == ' ' || c == '\t' || c == '\r') {
          state_ = State::kExtension;
          return i;  // the extension state handles this byte
        }
        return status::IOError("chunked body: bad byte in chunk size");
      }
      return i;
    case State::kExtension:
      for (; i < n; ++i) {
        if (in[i] == '\n') {
          // Re-enter kSize at its line end, with the digits already read.
          state_ = State::kSize;
          return i;
        }
      }
      return i;
    case State::kData: {
      const size_t take = static_cast<size_t>(std::min<uint64_t>(left_, n));
      *data = in;
      *data_len = take;
      left_ -= take;
      if (left_ == 0) state_ = State::kDataCr;
      return take;
    }
    case State::kDataCr:
      if (in[0] == '\r') {
        state_ = State::kDataLf;
      } else if (in[0] == '\n') {
        state_ = State::kSize;
      } else {
        return status::IOError("chunked body: chunk data longer than its size");
      }
      return 1;
    case State::kDataLf:
      if (in[0] != '\n')
        return status::IOError("chunked body: chunk data longer than its size");
      state_ = State::kSize;
      return 1;
    case State::kTrailer:
      for (; i < n; ++i) {
        if (++trailer_bytes_ > kMaxTrailerBytes) {
          return status::IOError("chunked body: trailer larger than 64 KiB");
        }
        if (in[i] == '\n') {
          if (line_ == 0) {
            state_ = State::kDone;
            return i + 1;
          }
          line_ = 0;
        } else if (in[i] != '\r') {
          ++line_;
        }
      }
      return i;
    case State::kDone:
      return 0;
  }
  return i;
}

}  // namespace stoker::io
