#include "stoker/io/sigv4.h"

#include <gtest/gtest.h>

namespace stoker::io {
namespace {

// AWS's published example of a signed S3 GET Object with a Range header ("Signature
// Calculations for the Authorization Header: Transferring Payload in a Single Chunk").
TEST(SigV4Test, MatchesAwsGetObjectExample) {
  SigV4Signer signer("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                     "us-east-1", "s3");
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
  SigV4Signer signer("AKID", "secret", "eu-west-1", "s3");
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

}  // namespace
}  // namespace stoker::io
