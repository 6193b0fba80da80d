#include "stoker/io/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <cstring>

namespace stoker::io {

namespace {

void Hmac(const uint8_t* key, size_t key_len, std::string_view data, uint8_t out[32]) {
  unsigned int len = 32;
  HMAC(EVP_sha256(), key, static_cast<int>(key_len),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
}

void Hex(const uint8_t* bytes, size_t n, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < n; ++i) {
    out->push_back(kHex[bytes[i] >> 4]);
    out->push_back(kHex[bytes[i] & 15]);
  }
}

void Wipe(std::string* s) {
  volatile char* p = s->data();
  for (size_t i = 0; i < s->size(); ++i) p[i] = '\0';
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  uint8_t digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  std::string hex;
  hex.reserve(64);
  Hex(digest, sizeof(digest), &hex);
  return hex;
}

SigV4Signer::SigV4Signer(std::string access_key_id, std::string secret_access_key,
                         std::string region, std::string service)
    : access_key_id_(std::move(access_key_id)),
      secret_(std::move(secret_access_key)),
      region_(std::move(region)),
      service_(std::move(service)) {}

SigV4Signer::~SigV4Signer() {
  Wipe(&secret_);
  volatile uint8_t* key = signing_key_;
  for (size_t i = 0; i < sizeof(signing_key_); ++i) key[i] = 0;
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
  if (key_date_ != day) {
    // kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, day), region), service),
    // "aws4_request")
    std::string first = "AWS4" + secret_;
    uint8_t k[32];
    Hmac(reinterpret_cast<const uint8_t*>(first.data()), first.size(), day, k);
    Wipe(&first);
    Hmac(k, 32, region_, k);
    Hmac(k, 32, service_, k);
    Hmac(k, 32, "aws4_request", signing_key_);
    key_date_ = std::string(day);
  }

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
  to_sign.append(Sha256Hex(c));
  uint8_t signature[32];
  Hmac(signing_key_, sizeof(signing_key_), to_sign, signature);

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
