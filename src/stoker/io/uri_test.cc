#include "stoker/io/uri.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace stoker::io {
namespace {

TEST(UriParse, Schemes) {
  auto s3 = ParseUri("s3://my-bucket/a/b c.jpg");
  ASSERT_TRUE(s3.ok());
  EXPECT_EQ(s3->scheme, Scheme::kS3);
  EXPECT_EQ(s3->host, "my-bucket");
  EXPECT_EQ(s3->path, "a/b c.jpg");

  auto http = ParseUri("https://[::1]:8443/x?sig=1");
  ASSERT_TRUE(http.ok());
  EXPECT_EQ(http->scheme, Scheme::kHttps);
  EXPECT_EQ(http->host, "::1");
  EXPECT_EQ(http->port, 8443);
  EXPECT_EQ(http->path, "/x?sig=1");

  auto bare = ParseUri("http://example.com");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->path, "/");

  auto file = ParseUri("file:///etc/passwd");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->scheme, Scheme::kFile);
  EXPECT_EQ(file->path, "/etc/passwd");

  auto local = ParseUri("images/cat.jpg");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->scheme, Scheme::kLocal);
}

TEST(UriParse, Malformed) {
  for (const char* text :
       {"", "s3://bucket", "s3://bucket/", "s3:///key", "http://", "http://host:99999/",
        "http://host:x/", "http://[::1/", "http://user:pw@host/", "file://server/share",
        "gopher://h/"}) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(ParseUri(text).ok());
  }
}

TEST(UriRedact, DropsUserInfoAndQuery) {
  EXPECT_EQ(RedactUri("https://u:SECRET@host/p?X-Amz-Signature=abc#f"), "https://host/p");
  EXPECT_EQ(RedactUri("s3://b/k?versionId=1"), "s3://b/k");
  EXPECT_EQ(RedactUri("plain/path"), "plain/path");
  // A user-info error must not echo the password either.
  auto r = ParseUri("http://user:SECRET@host/");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find("SECRET"), std::string::npos);
}

struct PolicyCase {
  const char* uri;
  const char* rule;  // nullptr: allowed
};

TEST(UriPolicyTable, DefaultPolicyRefusesInternalTargets) {
  UriPolicy policy;
  policy.local_root = "/data/images";
  const PolicyCase cases[] = {
      {"http://169.254.169.254/latest/meta-data/", "link-local address"},
      {"http://[::1]/", "loopback address"},
      {"http://0x7f.1/", "loopback address"},
      {"http://2130706433/", "loopback address"},
      {"http://0177.0.0.1/", "loopback address"},
      {"http://127.1/", "loopback address"},
      {"http://[::ffff:127.0.0.1]/", "loopback address"},
      {"http://[::ffff:169.254.169.254]/", "link-local address"},
      {"http://[fe80::1]/", "link-local address"},
      {"http://10.0.0.1/", "private address"},
      {"http://172.16.5.4/", "private address"},
      {"http://192.168.1.1/", "private address"},
      {"http://[fd00::1]/", "private address"},
      {"http://0.0.0.0/", "unspecified address"},
      {"http://localhost:8080/", "loopback address"},
      {"http://evil.localhost/", "loopback address"},
      {"http://LOCALHOST/", "loopback address"},
      {"gopher://example.com/", "scheme"},
      {"../../etc/passwd", "'..' escape"},
      {"a/../../etc/passwd", "'..' escape"},
      {"https://example.com/img.jpg", nullptr},
      {"http://93.184.216.34/img.jpg", nullptr},
      {"s3://bucket/key", nullptr},
      {"images/a..b.jpg", nullptr},
  };
  for (const PolicyCase& c : cases) {
    SCOPED_TRACE(c.uri);
    auto uri = ParseUri(c.uri);
    Status st = uri.ok() ? CheckUri(policy, *uri) : uri.status();
    if (c.rule == nullptr) {
      EXPECT_TRUE(st.ok()) << st.ToString();
    } else {
      ASSERT_FALSE(st.ok());
      EXPECT_NE(st.message().find(std::string("(rule: ") + c.rule + ")"),
                std::string::npos)
          << st.message();
    }
  }
}

TEST(UriPolicyTable, SchemesAllowListAndOptIn) {
  UriPolicy policy;
  policy.allowed_schemes = {"s3"};
  policy.allowed_hosts = {"good-bucket", "*.example.com"};
  const PolicyCase cases[] = {
      {"file:///etc/passwd", "scheme"},        {"/abs/path.jpg", "scheme"},
      {"https://cdn.example.com/x", "scheme"}, {"s3://good-bucket/k", nullptr},
      {"s3://GOOD-BUCKET/k", nullptr},         {"s3://other/k", "host allow-list"},
  };
  for (const PolicyCase& c : cases) {
    SCOPED_TRACE(c.uri);
    Status st = CheckUri(policy, *ParseUri(c.uri));
    if (c.rule == nullptr) {
      EXPECT_TRUE(st.ok()) << st.ToString();
    } else {
      EXPECT_NE(st.message().find(std::string("(rule: ") + c.rule + ")"),
                std::string::npos)
          << st.message();
    }
  }
  policy.allowed_schemes = {"https"};
  EXPECT_TRUE(CheckUri(policy, *ParseUri("https://cdn.example.com/x")).ok());
  Status suffix_only = CheckUri(policy, *ParseUri("https://example.com/x"));
  EXPECT_NE(suffix_only.message().find("host allow-list"), std::string::npos);
  Status lookalike = CheckUri(policy, *ParseUri("https://evilexample.com/x"));
  EXPECT_FALSE(lookalike.ok());

  UriPolicy open;
  open.allow_private_addresses = true;
  EXPECT_TRUE(CheckUri(open, *ParseUri("http://127.0.0.1:9000/x")).ok());
  // No image root: local paths refused outright.
  Status no_root = CheckUri(open, *ParseUri("img.jpg"));
  EXPECT_NE(no_root.message().find("(rule: local root)"), std::string::npos);
}

TEST(UriPolicyAddress, ResolvedAddresses) {
  UriPolicy policy;
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.53", &v4.sin_addr);
  Status st = CheckAddress(policy, reinterpret_cast<sockaddr*>(&v4), "http://name/x");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("(rule: loopback address)"), std::string::npos);
  EXPECT_NE(st.message().find("127.0.0.53"), std::string::npos);

  inet_pton(AF_INET, "8.8.8.8", &v4.sin_addr);
  EXPECT_TRUE(CheckAddress(policy, reinterpret_cast<sockaddr*>(&v4), "x").ok());

  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "fe80::abcd", &v6.sin6_addr);
  EXPECT_EQ(AddressClass(reinterpret_cast<sockaddr*>(&v6)), "link-local");
  inet_pton(AF_INET6, "2606:4700::1111", &v6.sin6_addr);
  EXPECT_EQ(AddressClass(reinterpret_cast<sockaddr*>(&v6)), "");
  policy.allow_private_addresses = true;
  inet_pton(AF_INET, "127.0.0.1", &v4.sin_addr);
  EXPECT_TRUE(CheckAddress(policy, reinterpret_cast<sockaddr*>(&v4), "x").ok());
}

class ConfineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stoker_uri_XXXXXX";
    base_ = ::mkdtemp(tmpl);
    root_ = base_ + "/root";
    std::filesystem::create_directories(root_ + "/sub");
    std::ofstream(root_ + "/sub/in.jpg") << "in";
    std::ofstream(base_ + "/secret.txt") << "secret";
    std::filesystem::create_symlink(base_ + "/secret.txt", root_ + "/escape.jpg");
    std::filesystem::create_symlink(base_, root_ + "/up");
    std::filesystem::create_symlink("sub/in.jpg", root_ + "/inner_link.jpg");
  }
  void TearDown() override { std::filesystem::remove_all(base_); }
  std::string base_, root_;
};

TEST_F(ConfineTest, InsideAllowedEscapesRefused) {
  auto in = ConfineLocalPath(root_, "sub/in.jpg");
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  auto inner = ConfineLocalPath(root_, "inner_link.jpg");
  EXPECT_TRUE(inner.ok());
  auto abs_in = ConfineLocalPath(root_, root_ + "/sub/in.jpg");
  EXPECT_TRUE(abs_in.ok());

  auto link = ConfineLocalPath(root_, "escape.jpg");
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.status().message().find("(rule: symlink escape)"), std::string::npos);
  auto dir_link = ConfineLocalPath(root_, "up/secret.txt");
  EXPECT_NE(dir_link.status().message().find("(rule: symlink escape)"),
            std::string::npos);
  auto dots = ConfineLocalPath(root_, "../../etc/passwd");
  EXPECT_NE(dots.status().message().find("(rule: '..' escape)"), std::string::npos);
  auto abs = ConfineLocalPath(root_, "/etc/passwd");
  EXPECT_NE(abs.status().message().find("(rule: outside image root)"), std::string::npos);
  auto missing = ConfineLocalPath(root_, "sub/none.jpg");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  // A sibling directory whose name extends the root's is not inside it.
  std::filesystem::create_directories(base_ + "/root2");
  std::ofstream(base_ + "/root2/x.jpg") << "x";
  EXPECT_FALSE(ConfineLocalPath(root_, base_ + "/root2/x.jpg").ok());
}

}  // namespace
}  // namespace stoker::io
