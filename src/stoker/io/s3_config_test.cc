#include "stoker/io/s3_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace stoker::io {
namespace {

constexpr char kCanary[] = "CANARYsecretDoNotLeak0123456789";

class S3ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stoker_s3cfg_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    std::ofstream(dir_ + "/credentials") << "[default]\n"
                                            "aws_access_key_id = AKIDDEFAULT0000\n"
                                            "aws_secret_access_key = default-secret\n"
                                            "\n[team]\n"
                                            "# a comment\n"
                                            "aws_access_key_id=AKIDTEAM00001111\n"
                                            "aws_secret_access_key="
                                         << kCanary
                                         << "\n"
                                            "aws_session_token = team-token\n";
    std::ofstream(dir_ + "/config") << "[default]\nregion = eu-west-1\n"
                                       "[profile team]\nregion = ap-south-1\n"
                                       "s3 =\n  endpoint_url = http://team.example:9000\n"
                                       "[profile cfgonly]\n"
                                       "aws_access_key_id = AKIDCFGONLY00000\n"
                                       "aws_secret_access_key = cfg-secret\n";
    vars_["HOME"] = dir_ + "/nohome";
    vars_["AWS_SHARED_CREDENTIALS_FILE"] = dir_ + "/credentials";
    vars_["AWS_CONFIG_FILE"] = dir_ + "/config";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  EnvLookup Env() {
    return [this](const std::string& name) -> std::optional<std::string> {
      auto it = vars_.find(name);
      if (it == vars_.end()) return std::nullopt;
      return it->second;
    };
  }

  std::string dir_;
  std::map<std::string, std::string> vars_;
};

TEST_F(S3ConfigTest, DefaultProfileFromFiles) {
  auto c = ResolveS3Config({}, Env());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials.access_key_id, "AKIDDEFAULT0000");
  EXPECT_EQ(c->region, "eu-west-1");
  EXPECT_EQ(c->endpoint_url, "https://s3.eu-west-1.amazonaws.com");
  EXPECT_FALSE(c->path_style);
  EXPECT_FALSE(c->custom_endpoint);
  EXPECT_EQ(S3ObjectUrl(*c, "my-bucket", "a b/c+d.jpg"),
            "https://my-bucket.s3.eu-west-1.amazonaws.com/a%20b/c%2Bd.jpg");
  // Not a DNS label: path style even when virtual-hosted is the default.
  EXPECT_EQ(S3ObjectUrl(*c, "My_Bucket", "k"),
            "https://s3.eu-west-1.amazonaws.com/My_Bucket/k");
}

TEST_F(S3ConfigTest, NamedProfileFromEnvWithNestedEndpoint) {
  vars_["AWS_PROFILE"] = "team";
  auto c = ResolveS3Config({}, Env());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials.access_key_id, "AKIDTEAM00001111");
  EXPECT_EQ(c->credentials.secret_access_key, kCanary);
  EXPECT_EQ(c->credentials.session_token, "team-token");
  EXPECT_EQ(c->region, "ap-south-1");
  EXPECT_EQ(c->endpoint_url, "http://team.example:9000");
  EXPECT_TRUE(c->path_style);  // custom endpoint, auto addressing
  EXPECT_EQ(S3ObjectUrl(*c, "b", "k"), "http://team.example:9000/b/k");
  EXPECT_EQ(c->ToString().find(kCanary), std::string::npos);
  EXPECT_EQ(c->ToString().find("team-token"), std::string::npos);
  EXPECT_NE(c->ToString().find("profile 'team'"), std::string::npos);
}

TEST_F(S3ConfigTest, CredentialsInConfigFileOnly) {
  S3Options o;
  o.profile = "cfgonly";
  auto c = ResolveS3Config(o, Env());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->credentials.access_key_id, "AKIDCFGONLY00000");
  EXPECT_NE(c->credentials_source.find("config file"), std::string::npos);
}

TEST_F(S3ConfigTest, PrecedenceExplicitOverEnvOverFiles) {
  vars_["AWS_ACCESS_KEY_ID"] = "AKIDENV000000000";
  vars_["AWS_SECRET_ACCESS_KEY"] = kCanary;
  vars_["AWS_SESSION_TOKEN"] = "env-token";
  vars_["AWS_REGION"] = "us-west-2";
  vars_["AWS_DEFAULT_REGION"] = "ignored-1";
  vars_["AWS_ENDPOINT_URL"] = "http://generic:1";
  vars_["AWS_ENDPOINT_URL_S3"] = "http://s3specific:2/";
  auto env = ResolveS3Config({}, Env());
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->credentials.access_key_id, "AKIDENV000000000");
  EXPECT_EQ(env->credentials.session_token, "env-token");
  EXPECT_EQ(env->region, "us-west-2");
  EXPECT_EQ(env->endpoint_url, "http://s3specific:2");
  EXPECT_EQ(env->credentials_source, "environment");

  vars_.erase("AWS_REGION");
  vars_.erase("AWS_ENDPOINT_URL_S3");
  auto fallback = ResolveS3Config({}, Env());
  EXPECT_EQ(fallback->region, "ignored-1");
  EXPECT_EQ(fallback->endpoint_url, "http://generic:1");

  S3Options o;
  o.access_key_id = "AKIDEXPLICIT0000";
  o.secret_access_key = "explicit-secret";
  o.region = "sa-east-1";
  o.endpoint_url = "https://minio.internal:9000";
  o.addressing = Addressing::kVirtual;
  auto ex = ResolveS3Config(o, Env());
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(ex->credentials.access_key_id, "AKIDEXPLICIT0000");
  EXPECT_TRUE(ex->credentials.session_token.empty());  // never mixed across sources
  EXPECT_EQ(ex->region, "sa-east-1");
  EXPECT_FALSE(ex->path_style);
  EXPECT_EQ(S3ObjectUrl(*ex, "bkt", "k"), "https://bkt.minio.internal:9000/k");
  // An explicit profile wins over environment credentials.
  S3Options p;
  p.profile = "team";
  EXPECT_EQ(ResolveS3Config(p, Env())->credentials.access_key_id, "AKIDTEAM00001111");
}

TEST_F(S3ConfigTest, Errors) {
  S3Options o;
  o.profile = "nope";
  auto missing = ResolveS3Config(o, Env());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'nope' not found"), std::string::npos);

  S3Options half;
  half.access_key_id = "AKID";
  EXPECT_FALSE(ResolveS3Config(half, Env()).ok());

  vars_["AWS_ACCESS_KEY_ID"] = "AKIDENV000000000";
  auto no_secret = ResolveS3Config({}, Env());
  EXPECT_FALSE(no_secret.ok());
  vars_.erase("AWS_ACCESS_KEY_ID");

  for (const char* bad : {"ftp://x", "http://x/path", "noscheme", "http://u:p@x"}) {
    S3Options e;
    e.endpoint_url = bad;
    EXPECT_FALSE(ResolveS3Config(e, Env()).ok()) << bad;
  }
}

TEST_F(S3ConfigTest, NoFilesNoEnvIsAnonymous) {
  std::map<std::string, std::string> none;
  auto c = ResolveS3Config({}, [](const std::string&) { return std::nullopt; });
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->credentials.empty());
  EXPECT_EQ(c->region, "us-east-1");
  EXPECT_EQ(c->credentials.ToString(), "anonymous");
  S3Options anon;
  anon.anonymous = true;
  EXPECT_TRUE(ResolveS3Config(anon, Env())->credentials.empty());
}

}  // namespace
}  // namespace stoker::io
