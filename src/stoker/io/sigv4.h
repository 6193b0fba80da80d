// AWS Signature Version 4 for the engine's own HTTP/1.1 client (plain http://).
//
// curl signs the requests it sends (CURLOPT_AWS_SIGV4); the engine's own client signs
// here. The signing key is derived from the secret once per day, and the HMAC's two
// padded-key blocks are hashed with it, so a request costs one SHA-256 of its
// canonical request and the two short hashes of one HMAC (about 1 us), not five HMACs.
// Checked against AWS's published GET Object example (sigv4_test.cc) and, in the
// Python tests, against an independent signer over real requests.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stoker/core/status.h"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header

namespace stoker::io {

class SigV4Signer {
 public:
  // Errors: Internal when OpenSSL offers no SHA-256 (a provider configuration without
  // the default provider).
  static Result<std::unique_ptr<SigV4Signer>> Make(std::string access_key_id,
                                                   std::string secret_access_key,
                                                   std::string region,
                                                   std::string service);
  ~SigV4Signer();  // overwrites the secret and the states derived from it
  SigV4Signer(const SigV4Signer&) = delete;
  SigV4Signer& operator=(const SigV4Signer&) = delete;

  // The Authorization header's value for a request. `headers` are the signed headers:
  // lower-case names, values as sent, sorted by name, and including `host` and
  // `x-amz-date` (whose value is `amz_date`, "YYYYMMDDTHHMMSSZ"). `canonical_uri` is
  // the path as sent (S3 paths are already percent-encoded and not encoded again);
  // `canonical_query` the sorted, encoded query ("" when none). Empty if OpenSSL
  // fails (out of memory).
  std::string Authorization(
      std::string_view method, std::string_view canonical_uri,
      std::string_view canonical_query,
      const std::vector<std::pair<std::string_view, std::string_view>>& headers,
      std::string_view payload_sha256, std::string_view amz_date);

  // "YYYYMMDDTHHMMSSZ" for a UTC time.
  static std::string AmzDate(std::time_t t);

 private:
  SigV4Signer(std::string access_key_id, std::string secret_access_key,
              std::string region, std::string service);
  bool DeriveKey(std::string_view day);

  std::string access_key_id_, secret_, region_, service_;
  std::string key_date_;  // the day the key behind inner_ / outer_ was derived for
  // SHA-256 states: inner_ and outer_ have taken the signing key's HMAC blocks (key
  // XOR ipad, key XOR opad); work_ is copied from them, or started afresh, per hash.
  evp_md_ctx_st* work_ = nullptr;
  evp_md_ctx_st* inner_ = nullptr;
  evp_md_ctx_st* outer_ = nullptr;
  std::string canonical_;  // reused per request
};

}  // namespace stoker::io
