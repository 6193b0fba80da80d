#include "stoker/io/sigv4.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string>
#include <string_view>

namespace stoker::io {
namespace {

std::string Hex(std::string_view bytes) {
  std::string hex;
  for (unsigned char ch : bytes) {
    hex += "0123456789abcdef"[ch >> 4];
    hex += "0123456789abcdef"[ch & 15];
  }
  return hex;
}

// Lower-case hex of SHA-256 of `data` (the payload and canonical-request hashes).
std::string Sha256Hex(std::string_view data) {
  unsigned char digest[32];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  return Hex(std::string_view(reinterpret_cast<char*>(digest), len));
}

// AWS's published example of a signed S3 GET Object with a Range header ("Signature
// Calculations for the Authorization Header: Transferring Payload in a Single Chunk").
TEST(SigV4Test, MatchesAwsGetObjectExample) {
  auto made =
      SigV4Signer::Make("AKIAIOSFODNN7EXAMPLE",
                        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", "s3");
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  SigV4Signer& signer = **made;
  const std::string empty = Sha256Hex("");
  EXPECT_EQ(empty, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string auth =
      signer.Authorization("GET", "/test.txt", "",
                           {{"host", "examplebucket.s3.amazonaws.com"},
                            {"range", "bytes=0-9"},
                            {"x-amz-content-sha256", empty},
                            {"x-amz-date", "20130524T000000Z"}},
                           empty, "20130524T000000Z");
  EXPECT_EQ(auth,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4Test, CachedKeyFollowsTheDayAndValuesAreTrimmed) {
  auto made = SigV4Signer::Make("AKID", "secret", "eu-west-1", "s3");
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  SigV4Signer& signer = **made;
  const std::string empty = Sha256Hex("");
  auto sign = [&](std::string_view date, std::string_view range) {
    return signer.Authorization("GET", "/b/k", "",
                                {{"host", "h"}, {"range", range}, {"x-amz-date", date}},
                                empty, date);
  };
  const std::string day1 = sign("20261130T000000Z", "bytes=0-9");
  const std::string day2 = sign("20261201T000000Z", "bytes=0-9");
  EXPECT_NE(day1.substr(day1.find("Signature=")), day2.substr(day2.find("Signature=")));
  // Back to day 1 (a new key derived again) gives the first signature again.
  EXPECT_EQ(sign("20261130T000000Z", "bytes=0-9"), day1);
  // Canonical values: outer spaces trimmed, inner runs collapsed.
  EXPECT_EQ(sign("20261130T000000Z", "  bytes=0-9 "), day1);
  EXPECT_NE(sign("20261130T000000Z", "bytes=0-8"), day1);
  EXPECT_EQ(SigV4Signer::AmzDate(0), "19700101T000000Z");
}

// The signer's HMAC keeps the padded key's hash states and reuses them; this reference
// calls OpenSSL's one-shot HMAC for every step, as the specification reads.
std::string ReferenceSignature(const std::string& secret, const std::string& day,
                               const std::string& region, const std::string& to_sign) {
  auto hmac = [](const std::string& key, const std::string& data) {
    unsigned char out[32];
    unsigned int len = 32;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
         reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
    return std::string(reinterpret_cast<char*>(out), len);
  };
  const std::string key =
      hmac(hmac(hmac(hmac("AWS4" + secret, day), region), "s3"), "aws4_request");
  return Hex(hmac(key, to_sign));
}

// Secrets of every length around SHA-256's 64-byte block (with "AWS4", a secret of 61
// bytes or more is hashed before use as a key), over two days.
TEST(SigV4Test, MatchesOneShotHmacForSecretsOfAnyLength) {
  const std::string empty = Sha256Hex("");
  for (size_t length : {0u, 1u, 40u, 59u, 60u, 61u, 64u, 65u, 100u, 200u}) {
    std::string secret;
    for (size_t i = 0; i < length; ++i) secret += static_cast<char>('A' + (i * 7) % 26);
    auto made = SigV4Signer::Make("AKID", secret, "ap-south-1", "s3");
    ASSERT_TRUE(made.ok());
    for (const std::string date : {"20261130T235959Z", "20261201T000000Z"}) {
      const std::string auth =
          (*made)->Authorization("GET", "/bucket/key", "",
                                 {{"host", "h:9000"}, {"x-amz-date", date}}, empty, date);
      const std::string canonical =
          "GET\n/bucket/key\n\nhost:h:9000\nx-amz-date:" + date +
          "\n\nhost;x-amz-date\n" + empty;
      const std::string day = date.substr(0, 8);
      const std::string to_sign = "AWS4-HMAC-SHA256\n" + date + "\n" + day +
                                  "/ap-south-1/s3/aws4_request\n" + Sha256Hex(canonical);
      EXPECT_EQ(auth.substr(auth.find("Signature=") + 10),
                ReferenceSignature(secret, day, "ap-south-1", to_sign))
          << "secret of " << length << " bytes, " << date;
    }
  }
}

}  // namespace
}  // namespace stoker::io
