#include "stoker/io/sigv4.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstring>

namespace stoker::io {

namespace {

constexpr size_t kBlock = 64;   // SHA-256's block size
constexpr size_t kDigest = 32;  // and its digest's

// Fetched once for the process: an implicit fetch (EVP_sha256()) on every hash costs
// more than hashing a request.
const EVP_MD* Sha256Md() {
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

// SHA-256 of `data` into `out`, continuing from `from` (a state that has taken an HMAC
// block) or from the start when `from` is null.
bool Hash(EVP_MD_CTX* work, const EVP_MD_CTX* from, std::string_view data,
          uint8_t out[kDigest]) {
  const int started = from != nullptr ? EVP_MD_CTX_copy_ex(work, from)
                                      : EVP_DigestInit_ex2(work, Sha256Md(), nullptr);
  return started == 1 && EVP_DigestUpdate(work, data.data(), data.size()) == 1 &&
         EVP_DigestFinal_ex(work, out, nullptr) == 1;
}

// Readies `inner` and `outer` for HMAC-SHA256 under `key` (RFC 2104): each takes the
// key, padded to a block, XOR ipad / opad.
bool StartHmac(EVP_MD_CTX* work, EVP_MD_CTX* inner, EVP_MD_CTX* outer, const uint8_t* key,
               size_t key_len) {
  uint8_t block[kBlock] = {};
  bool ok = true;
  if (key_len > kBlock) {  // a long key is hashed first
    ok = Hash(work, nullptr,
              std::string_view(reinterpret_cast<const char*>(key), key_len), block);
  } else {
    std::memcpy(block, key, key_len);
  }
  for (uint8_t& b : block) b ^= 0x36;
  ok = ok && EVP_DigestInit_ex2(inner, Sha256Md(), nullptr) == 1 &&
       EVP_DigestUpdate(inner, block, kBlock) == 1;
  for (uint8_t& b : block) b ^= 0x36 ^ 0x5c;
  ok = ok && EVP_DigestInit_ex2(outer, Sha256Md(), nullptr) == 1 &&
       EVP_DigestUpdate(outer, block, kBlock) == 1;
  OPENSSL_cleanse(block, sizeof(block));
  return ok;
}

// HMAC-SHA256 of `data` under the key `inner` and `outer` were started with.
bool FinishHmac(EVP_MD_CTX* work, const EVP_MD_CTX* inner, const EVP_MD_CTX* outer,
                std::string_view data, uint8_t out[kDigest]) {
  uint8_t inner_hash[kDigest];
  return Hash(work, inner, data, inner_hash) &&
         Hash(work, outer,
              std::string_view(reinterpret_cast<const char*>(inner_hash), kDigest), out);
}

void Hex(const uint8_t* bytes, size_t n, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < n; ++i) {
    out->push_back(kHex[bytes[i] >> 4]);
    out->push_back(kHex[bytes[i] & 15]);
  }
}

}  // namespace

Result<std::unique_ptr<SigV4Signer>> SigV4Signer::Make(std::string access_key_id,
                                                       std::string secret_access_key,
                                                       std::string region,
                                                       std::string service) {
  std::unique_ptr<SigV4Signer> signer(
      new SigV4Signer(std::move(access_key_id), std::move(secret_access_key),
                      std::move(region), std::move(service)));
  if (Sha256Md() == nullptr || signer->work_ == nullptr || signer->inner_ == nullptr ||
      signer->outer_ == nullptr) {
    return status::Internal(
        "cannot sign S3 requests: OpenSSL offers no SHA-256 (is its default provider "
        "configured?)");
  }
  return signer;
}

SigV4Signer::SigV4Signer(std::string access_key_id, std::string secret_access_key,
                         std::string region, std::string service)
    : access_key_id_(std::move(access_key_id)),
      secret_(std::move(secret_access_key)),
      region_(std::move(region)),
      service_(std::move(service)),
      work_(EVP_MD_CTX_new()),
      inner_(EVP_MD_CTX_new()),
      outer_(EVP_MD_CTX_new()) {}

SigV4Signer::~SigV4Signer() {
  OPENSSL_cleanse(secret_.data(), secret_.size());
  // Freeing a digest state cleanses it.
  EVP_MD_CTX_free(work_);
  EVP_MD_CTX_free(inner_);
  EVP_MD_CTX_free(outer_);
}

bool SigV4Signer::DeriveKey(std::string_view day) {
  // kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, day), region), service),
  // "aws4_request"); then inner_ / outer_ take its HMAC blocks.
  std::string first = "AWS4" + secret_;
  uint8_t key[kDigest];
  bool ok = StartHmac(work_, inner_, outer_,
                      reinterpret_cast<const uint8_t*>(first.data()), first.size()) &&
            FinishHmac(work_, inner_, outer_, day, key);
  OPENSSL_cleanse(first.data(), first.size());
  for (std::string_view part : {std::string_view(region_), std::string_view(service_),
                                std::string_view("aws4_request")}) {
    ok = ok && StartHmac(work_, inner_, outer_, key, kDigest) &&
         FinishHmac(work_, inner_, outer_, part, key);
  }
  ok = ok && StartHmac(work_, inner_, outer_, key, kDigest);
  OPENSSL_cleanse(key, sizeof(key));
  key_date_ = ok ? std::string(day) : std::string();
  return ok;
}

std::string SigV4Signer::AmzDate(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[20];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string SigV4Signer::Authorization(
    std::string_view method, std::string_view canonical_uri,
    std::string_view canonical_query,
    const std::vector<std::pair<std::string_view, std::string_view>>& headers,
    std::string_view payload_sha256, std::string_view amz_date) {
  const std::string_view day = amz_date.substr(0, 8);
  if (key_date_ != day && !DeriveKey(day)) return "";

  // Canonical request: method, URI, query, headers (name:value\n each), a blank line's
  // worth of separator, the signed header names, the payload hash.
  std::string& c = canonical_;
  c.clear();
  c.append(method).push_back('\n');
  c.append(canonical_uri).push_back('\n');
  c.append(canonical_query).push_back('\n');
  std::string signed_names;
  for (const auto& [name, value] : headers) {
    c.append(name).push_back(':');
    // Values are trimmed, and inner runs of spaces collapse to one.
    size_t i = 0, n = value.size();
    while (i < n && value[i] == ' ') ++i;
    while (n > i && value[n - 1] == ' ') --n;
    bool space = false;
    for (; i < n; ++i) {
      if (value[i] == ' ') {
        space = true;
        continue;
      }
      if (space) c.push_back(' ');
      space = false;
      c.push_back(value[i]);
    }
    c.push_back('\n');
    if (!signed_names.empty()) signed_names.push_back(';');
    signed_names.append(name);
  }
  c.push_back('\n');
  c.append(signed_names).push_back('\n');
  c.append(payload_sha256);

  std::string scope;
  scope.reserve(64);
  scope.append(day).append("/").append(region_).append("/").append(service_).append(
      "/aws4_request");
  std::string to_sign;
  to_sign.reserve(160);
  to_sign.append("AWS4-HMAC-SHA256\n")
      .append(amz_date)
      .append("\n")
      .append(scope)
      .append("\n");
  uint8_t digest[kDigest];
  if (!Hash(work_, nullptr, c, digest)) return "";
  Hex(digest, kDigest, &to_sign);
  uint8_t signature[kDigest];
  if (!FinishHmac(work_, inner_, outer_, to_sign, signature)) return "";

  std::string out;
  out.reserve(200 + signed_names.size());
  out.append("AWS4-HMAC-SHA256 Credential=")
      .append(access_key_id_)
      .append("/")
      .append(scope);
  out.append(", SignedHeaders=").append(signed_names).append(", Signature=");
  Hex(signature, sizeof(signature), &out);
  return out;
}

}  // namespace stoker::io
