// Where S3 requests go and who signs them: endpoint, region, addressing style and
// credentials, resolved like the AWS CLI and SDKs do.
//
// Precedence, highest first: explicit options; environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_DEFAULT_REGION,
// AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS_PROFILE); the shared credentials file
// (~/.aws/credentials or AWS_SHARED_CREDENTIALS_FILE, sections "[name]") and config file
// (~/.aws/config or AWS_CONFIG_FILE, sections "[default]" and "[profile name]"). No
// instance metadata lookup is made. With no credentials at all, requests go unsigned
// (public buckets).
//
// Secrets stay out of every string this file produces: ToString shows the key id's
// last four characters and never the secret or the session token.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "stoker/core/status.h"

namespace stoker::io {

// Looks up an environment variable; injectable so tests need not touch the process
// environment. The default reads getenv.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup ProcessEnv();

enum class Addressing { kAuto, kPath, kVirtual };

// What a caller may set explicitly; empty fields fall through to the environment and
// the shared files.
struct S3Options {
  std::string endpoint_url;
  std::string region;
  std::string profile;
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  Addressing addressing = Addressing::kAuto;
  std::string credentials_file;  // overrides AWS_SHARED_CREDENTIALS_FILE
  std::string config_file;       // overrides AWS_CONFIG_FILE
  bool anonymous = false;        // never sign, even when credentials are found
};

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  bool empty() const { return access_key_id.empty(); }
  // "AKIA…WXYZ (secret set, session token set)": never the secret.
  std::string ToString() const;
};

struct S3Config {
  std::string endpoint_url;  // scheme://host[:port], no trailing '/'
  std::string region;
  bool path_style = false;
  bool custom_endpoint = false;  // not the AWS default endpoint for the region
  S3Credentials credentials;
  std::string credentials_source;  // "explicit", "environment", "profile <name> (file)"
  std::string ToString() const;
};

Result<S3Config> ResolveS3Config(const S3Options& options, const EnvLookup& env);

// Whether `bucket` can be a DNS label for virtual-hosted addressing.
bool IsDnsCompatibleBucket(const std::string& bucket);

// scheme://host[:port]/path for `bucket`/`key` under `config` (key percent-encoded
// except '/').
std::string S3ObjectUrl(const S3Config& config, const std::string& bucket,
                        const std::string& key);

}  // namespace stoker::io
