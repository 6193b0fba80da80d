// AWS Signature Version 4 for the engine's own HTTP/1.1 client (plain http://).
//
// curl signs the requests it sends (CURLOPT_AWS_SIGV4); the engine's own client signs
// here. The signing key is derived from the secret once per day and region, so a
// request costs one SHA-256 of its canonical request and one HMAC, not five HMACs.
// Checked against AWS's published GET Object example (sigv4_test.cc) and, in the
// Python tests, against an independent signer over real requests.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stoker::io {

class SigV4Signer {
 public:
  SigV4Signer(std::string access_key_id, std::string secret_access_key,
              std::string region, std::string service);
  ~SigV4Signer();  // overwrites the secret and the cached key
  SigV4Signer(const SigV4Signer&) = delete;
  SigV4Signer& operator=(const SigV4Signer&) = delete;

  // The Authorization header's value for a request. `headers` are the signed headers:
  // lower-case names, values as sent, sorted by name, and including `host` and
  // `x-amz-date` (whose value is `amz_date`, "YYYYMMDDTHHMMSSZ"). `canonical_uri` is
  // the path as sent (S3 paths are already percent-encoded and not encoded again);
  // `canonical_query` the sorted, encoded query ("" when none).
  std::string Authorization(
      std::string_view method, std::string_view canonical_uri,
      std::string_view canonical_query,
      const std::vector<std::pair<std::string_view, std::string_view>>& headers,
      std::string_view payload_sha256, std::string_view amz_date);

  // "YYYYMMDDTHHMMSSZ" for a UTC time.
  static std::string AmzDate(std::time_t t);

 private:
  std::string access_key_id_, secret_, region_, service_;
  std::string key_date_;  // the day the cached key was derived for
  uint8_t signing_key_[32] = {};
  std::string canonical_;  // reused per request
};

// Lower-case hex of SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

}  // namespace stoker::io
