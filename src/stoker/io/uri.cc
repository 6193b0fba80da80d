#include "stoker/io/uri.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

namespace stoker::io {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string_view V4Class(uint32_t a) {  // host byte order
  const uint32_t b0 = a >> 24, b1 = (a >> 16) & 0xff;
  if (b0 == 0) return "unspecified";
  if (b0 == 127) return "loopback";
  if (b0 == 169 && b1 == 254) return "link-local";
  if (b0 == 10 || (b0 == 172 && (b1 & 0xf0) == 16) || (b0 == 192 && b1 == 168) ||
      (b0 == 100 && (b1 & 0xc0) == 64)) {
    return "private";
  }
  if (b0 >= 224) return "multicast";  // multicast, reserved and broadcast
  return "";
}

std::string_view V6Class(const in6_addr& a) {
  const uint8_t* b = a.s6_addr;
  static const uint8_t kZero[16] = {};
  if (std::memcmp(b, kZero, 15) == 0 && b[15] == 0) return "unspecified";
  if (std::memcmp(b, kZero, 15) == 0 && b[15] == 1) return "loopback";
  // IPv4-mapped (::ffff:a.b.c.d) and the deprecated IPv4-compatible (::a.b.c.d) forms
  // reach the IPv4 address they embed.
  const bool mapped = std::memcmp(b, kZero, 10) == 0 && b[10] == 0xff && b[11] == 0xff;
  const bool compat = std::memcmp(b, kZero, 12) == 0;
  if (mapped || compat) {
    uint32_t v4 = (uint32_t{b[12]} << 24) | (uint32_t{b[13]} << 16) |
                  (uint32_t{b[14]} << 8) | b[15];
    return V4Class(v4);
  }
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return "link-local";
  if ((b[0] & 0xfe) == 0xfc) return "private";                  // unique local fc00::/7
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return "private";  // site-local fec0::/10
  if (b[0] == 0xff) return "multicast";
  return "";
}

// The class of a literal address in `host`, "" when public, or nullopt-like "-" when
// the host is a name rather than an address.
std::string_view LiteralHostClass(const std::string& host) {
  in6_addr a6;
  if (inet_pton(AF_INET6, host.c_str(), &a6) == 1) return V6Class(a6);
  in_addr a4;
  // inet_aton accepts the legacy spellings too (0x7f.1, 2130706433, 0177.0.0.1), which
  // is exactly why it is used here: curl and the resolver accept them as well.
  if (inet_aton(host.c_str(), &a4) == 1) return V4Class(ntohl(a4.s_addr));
  return "-";
}

bool HostAllowed(const std::vector<std::string>& allowed, const std::string& host) {
  if (allowed.empty()) return true;
  const std::string h = Lower(host);
  for (const std::string& entry : allowed) {
    const std::string e = Lower(entry);
    if (StartsWith(e, "*.")) {
      const std::string suffix = e.substr(1);  // ".example.com"
      if (h.size() > suffix.size() &&
          h.compare(h.size() - suffix.size(), suffix.size(), suffix) == 0) {
        return true;
      }
    } else if (h == e) {
      return true;
    }
  }
  return false;
}

bool HasDotDot(std::string_view path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (path.substr(start, end - start) == "..") return true;
    start = end + 1;
  }
  return false;
}

Status Refused(std::string_view rule, std::string_view uri, std::string_view detail) {
  return status::InvalidArgument("URI '", RedactUri(uri),
                                 "' refused by policy (rule: ", rule, "): ", detail);
}

std::string Display(const Uri& uri) {
  switch (uri.scheme) {
    case Scheme::kLocal:
      return uri.path;
    case Scheme::kFile:
      return "file://" + uri.path;
    case Scheme::kS3:
      return "s3://" + uri.host + "/" + uri.path;
    default:
      break;
  }
  std::string out = std::string(SchemeName(uri.scheme)) + "://";
  out += uri.host.find(':') != std::string::npos ? "[" + uri.host + "]" : uri.host;
  if (uri.port) out += ":" + std::to_string(uri.port);
  return out + uri.path;
}

}  // namespace

std::string_view SchemeName(Scheme scheme) {
  switch (scheme) {
    case Scheme::kLocal:
      return "local";
    case Scheme::kFile:
      return "file";
    case Scheme::kS3:
      return "s3";
    case Scheme::kHttp:
      return "http";
    case Scheme::kHttps:
      return "https";
  }
  return "?";
}

std::string RedactUri(std::string_view text) {
  std::string out(text.substr(0, text.find_first_of("?#")));
  const size_t sep = out.find("://");
  if (sep != std::string::npos) {
    const size_t auth = sep + 3;
    const size_t end = std::min(out.find('/', auth), out.size());
    const size_t at = out.rfind('@', end);
    if (at != std::string::npos && at >= auth) out.erase(auth, at + 1 - auth);
  }
  return out;
}

std::string PercentEncode(std::string_view text, bool (*keep)(unsigned char)) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() + 8);
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (keep(c)) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Result<Uri> ParseUri(std::string_view text) {
  Uri uri;
  if (text.empty()) return status::InvalidArgument("empty URI");
  const size_t sep = text.find("://");
  if (sep == std::string_view::npos) {
    uri.scheme = Scheme::kLocal;
    uri.path = std::string(text);
    return uri;
  }
  const std::string scheme = Lower(text.substr(0, sep));
  std::string_view rest = text.substr(sep + 3);
  if (scheme == "file") {
    // file:///abs/path or file://localhost/abs/path; any other authority is a remote
    // file share we do not speak.
    if (StartsWith(rest, "localhost/")) rest.remove_prefix(9);
    if (!StartsWith(rest, "/")) {
      return status::InvalidArgument("URI '", RedactUri(text),
                                     "': file URIs must be file:///absolute/path");
    }
    uri.scheme = Scheme::kFile;
    uri.path = std::string(rest);
    return uri;
  }
  if (scheme == "s3") {
    const size_t slash = rest.find('/');
    uri.scheme = Scheme::kS3;
    uri.host = std::string(rest.substr(0, slash));
    if (uri.host.empty() || slash == std::string_view::npos || slash + 1 == rest.size()) {
      return status::InvalidArgument("URI '", RedactUri(text),
                                     "': expected s3://bucket/key");
    }
    uri.path = std::string(rest.substr(slash + 1));
    return uri;
  }
  if (scheme != "http" && scheme != "https") {
    return Refused("scheme", text, "scheme '" + scheme + "' is not supported");
  }
  uri.scheme = scheme == "http" ? Scheme::kHttp : Scheme::kHttps;
  const size_t path_start = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_start);
  uri.path =
      path_start == std::string_view::npos ? "/" : std::string(rest.substr(path_start));
  if (!uri.path.empty() && uri.path[0] != '/') uri.path.insert(0, "/");
  if (const size_t hash = uri.path.find('#'); hash != std::string::npos) {
    uri.path.resize(hash);
  }
  if (authority.find('@') != std::string_view::npos) {
    return status::InvalidArgument("URI '", RedactUri(text),
                                   "': user info in a URI is not accepted");
  }
  std::string_view port_text;
  if (StartsWith(authority, "[")) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return status::InvalidArgument("URI '", RedactUri(text), "': unclosed '[' in host");
    }
    uri.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') {
        return status::InvalidArgument("URI '", RedactUri(text), "': malformed host");
      }
      port_text = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    uri.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (uri.host.empty()) {
    return status::InvalidArgument("URI '", RedactUri(text), "': no host");
  }
  if (!port_text.empty()) {
    int port = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9' || port > 65535) {
        return status::InvalidArgument("URI '", RedactUri(text), "': bad port");
      }
      port = port * 10 + (c - '0');
    }
    if (port == 0 || port > 65535) {
      return status::InvalidArgument("URI '", RedactUri(text), "': bad port");
    }
    uri.port = port;
  }
  return uri;
}

std::string_view AddressClass(const struct sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    return V4Class(ntohl(in->sin_addr.s_addr));
  }
  if (address->sa_family == AF_INET6) {
    return V6Class(reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
  }
  return "unspecified";  // not an internet address: never a destination we allow
}

Status CheckAddress(const UriPolicy& policy, const struct sockaddr* address,
                    std::string_view what) {
  if (policy.allow_private_addresses) return Status::OK();
  const std::string_view cls = AddressClass(address);
  if (cls.empty()) return Status::OK();
  char text[INET6_ADDRSTRLEN] = "?";
  if (address->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text,
              sizeof(text));
  } else if (address->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text,
              sizeof(text));
  }
  return Refused(std::string(cls) + " address", what,
                 std::string("resolves to ") + text + ", a " + std::string(cls) +
                     " address (set allow_private_addresses to reach it)");
}

Status CheckUri(const UriPolicy& policy, const Uri& uri) {
  const std::string shown = Display(uri);
  const std::string_view scheme = SchemeName(uri.scheme);
  if (std::find(policy.allowed_schemes.begin(), policy.allowed_schemes.end(), scheme) ==
      policy.allowed_schemes.end()) {
    return Refused("scheme", shown,
                   "scheme '" + std::string(scheme) + "' is not allowed");
  }
  if (!uri.is_remote()) {
    if (policy.local_root.empty()) {
      return Refused("local root", shown, "local paths are refused (no image root set)");
    }
    if (HasDotDot(uri.path)) {
      return Refused("'..' escape", shown, "the path has a '..' component");
    }
    return Status::OK();
  }
  if (!HostAllowed(policy.allowed_hosts, uri.host)) {
    return Refused("host allow-list", shown,
                   std::string(uri.scheme == Scheme::kS3 ? "bucket '" : "host '") +
                       uri.host + "' is not in the allow-list");
  }
  if (uri.is_http() && !policy.allow_private_addresses) {
    const std::string host = Lower(uri.host);
    std::string_view cls = LiteralHostClass(host);
    if (cls == "-" &&
        (host == "localhost" || (host.size() > 10 && host.ends_with(".localhost")))) {
      cls = "loopback";  // RFC 6761: resolves to loopback without asking DNS
    }
    if (cls != "-" && !cls.empty()) {
      return Refused(std::string(cls) + " address", shown,
                     "host '" + uri.host + "' is a " + std::string(cls) + " address");
    }
  }
  return Status::OK();
}

Result<std::string> ConfineLocalPath(const std::string& root, const std::string& path) {
  if (root.empty()) {
    return Refused("local root", path, "local paths are refused (no image root set)");
  }
  if (HasDotDot(path)) {
    return Refused("'..' escape", path, "the path has a '..' component");
  }
  char resolved_root[PATH_MAX];
  if (::realpath(root.c_str(), resolved_root) == nullptr) {
    return status::NotFound("image root '", root, "': ", std::strerror(errno));
  }
  const std::string joined = (!path.empty() && path[0] == '/') ? path : root + "/" + path;
  char resolved[PATH_MAX];
  if (::realpath(joined.c_str(), resolved) == nullptr) {
    const int err = errno;
    std::string message = "cannot open '" + path + "': " + std::strerror(err);
    if (err == ENOENT || err == ENOTDIR) return status::NotFound(message);
    return status::IOError(message);
  }
  std::string base(resolved_root);
  if (base != "/") base += "/";
  if (!StartsWith(resolved, base)) {
    const bool absolute_outside =
        !path.empty() && path[0] == '/' && !StartsWith(path, std::string(resolved_root));
    if (absolute_outside) {
      return Refused("outside image root", path, "the path is not under the image root");
    }
    return Refused("symlink escape", path,
                   "resolves outside the image root through a symbolic link");
  }
  return std::string(resolved);
}

}  // namespace stoker::io
