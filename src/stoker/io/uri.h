// Object URIs and the policy that decides which of them a manifest may name.
//
// Manifests are untrusted input that choose what Stoker fetches, so every URI they name
// passes UriPolicy before any byte moves: allowed schemes, an optional host/bucket
// allow-list, no literal loopback/link-local/private addresses (and, at connect time,
// no resolved ones either: see CheckAddress), and local paths confined to the image
// root. The S3 endpoint the user configured is trusted and is not subject to the
// address rule. Every refusal names the rule that refused.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stoker/core/status.h"

struct sockaddr;

namespace stoker::io {

enum class Scheme { kLocal, kFile, kS3, kHttp, kHttps };

std::string_view SchemeName(Scheme scheme);  // "local", "file", "s3", "http", "https"

struct Uri {
  Scheme scheme = Scheme::kLocal;
  // http(s): the host as written (IPv6 without brackets); s3: the bucket; else empty.
  std::string host;
  int port = 0;  // http(s) only; 0 when the URI names none
  // local/file: the path; s3: the key (no leading '/'); http(s): path and query.
  std::string path;

  bool is_remote() const { return scheme == Scheme::kS3 || is_http(); }
  bool is_http() const { return scheme == Scheme::kHttp || scheme == Scheme::kHttps; }
};

// Parses "s3://bucket/key", "http(s)://host[:port]/path?query", "file:///abs/path" and
// plain paths. Refuses user info in http(s) URIs (credentials do not belong in
// manifests) and malformed authorities.
Result<Uri> ParseUri(std::string_view text);

// The URI with user info, query string and fragment removed: what errors and logs show,
// so that presigned-URL signatures and embedded passwords never leave the process.
std::string RedactUri(std::string_view text);

// `text` with every byte for which `keep` is false written as %XX (upper-case hex).
std::string PercentEncode(std::string_view text, bool (*keep)(unsigned char));

struct UriPolicy {
  // Scheme names a manifest may use: "local" (plain path), "file", "s3", "http", "https".
  std::vector<std::string> allowed_schemes = {"local", "file", "s3", "http", "https"};
  // When non-empty, the http(s) hosts and s3 buckets allowed: exact names, or "*.suffix"
  // for any subdomain of suffix. Case-insensitive.
  std::vector<std::string> allowed_hosts;
  // Lets http(s) URIs reach loopback, link-local, private (RFC 1918, ULA, CGNAT),
  // unspecified and multicast addresses. Off by default: this is what keeps a manifest
  // away from the instance metadata service and internal services.
  bool allow_private_addresses = false;
  // Local paths must resolve (symlinks followed) inside this directory. Empty: local
  // paths are refused.
  std::string local_root;
};

// The static checks: scheme, allow-list, literal addresses in every spelling inet_aton
// and inet_pton accept, and for local paths `..` components. Local paths are checked
// against the file system by ConfineLocalPath.
Status CheckUri(const UriPolicy& policy, const Uri& uri);

// Refuses an address the policy forbids; called with the resolved address when a
// connection opens, which defeats DNS names and rebinding that point at loopback.
// `what` names the URI in the error.
Status CheckAddress(const UriPolicy& policy, const struct sockaddr* address,
                    std::string_view what);

// Classifies an address: "" when public, else "loopback", "link-local", "private",
// "unspecified" or "multicast".
std::string_view AddressClass(const struct sockaddr* address);

// Resolves `path` (relative to `root`, or absolute) with every symlink followed, and
// returns it when it lies inside `root` (itself resolved). Refuses `..` components
// before touching the file system. NotFound when the file does not exist.
Result<std::string> ConfineLocalPath(const std::string& root, const std::string& path);

}  // namespace stoker::io
