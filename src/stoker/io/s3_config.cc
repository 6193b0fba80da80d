#include "stoker/io/s3_config.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>

#include "stoker/io/uri.h"

namespace stoker::io {

namespace {

using Section = std::map<std::string, std::string>;
using IniFile = std::map<std::string, Section>;

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// The subset of INI the AWS files use: [section], key = value, '#'/';' comments.
// Indented lines continue a nested block ("s3 =\n  endpoint_url = ..."); they are kept
// as "parent.key" so that a nested s3 endpoint_url can be read.
bool ReadIni(const std::string& path, IniFile* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line, section, parent;
  while (std::getline(in, line)) {
    const bool indented =
        !line.empty() && std::isspace(static_cast<unsigned char>(line[0]));
    const std::string t = Trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[' && t.back() == ']') {
      section = Trim(t.substr(1, t.size() - 2));
      (*out)[section];
      parent.clear();
      continue;
    }
    const size_t eq = t.find('=');
    if (eq == std::string::npos || section.empty()) continue;
    const std::string key = Trim(t.substr(0, eq));
    const std::string value = Trim(t.substr(eq + 1));
    if (indented && !parent.empty()) {
      (*out)[section][parent + "." + key] = value;
    } else {
      (*out)[section][key] = value;
      parent = value.empty() ? key : "";
    }
  }
  return true;
}

std::string Get(const EnvLookup& env, const std::string& name) {
  auto v = env(name);
  return v ? *v : std::string();
}

std::string HomeFile(const EnvLookup& env, const char* relative) {
  const std::string home = Get(env, "HOME");
  return home.empty() ? std::string() : home + "/" + relative;
}

const Section* Find(const IniFile& file, const std::string& name) {
  auto it = file.find(name);
  return it == file.end() ? nullptr : &it->second;
}

std::string Value(const Section* section, const std::string& key) {
  if (section == nullptr) return {};
  auto it = section->find(key);
  return it == section->end() ? std::string() : it->second;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

std::string S3Credentials::ToString() const {
  if (empty()) return "anonymous";
  std::string id = access_key_id.size() > 8
                       ? access_key_id.substr(0, 4) + "..." +
                             access_key_id.substr(access_key_id.size() - 4)
                       : std::string("...");
  return id + " (secret " + (secret_access_key.empty() ? "missing" : "set") +
         ", session token " + (session_token.empty() ? "none" : "set") + ")";
}

std::string S3Config::ToString() const {
  return "S3Config(endpoint=" + endpoint_url + ", region=" + region +
         ", addressing=" + (path_style ? "path" : "virtual") +
         ", credentials=" + credentials.ToString() + " from " + credentials_source + ")";
}

bool IsDnsCompatibleBucket(const std::string& bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char c : bucket) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.')) {
      return false;
    }
  }
  return bucket.front() != '-' && bucket.back() != '-' &&
         bucket.find("..") == std::string::npos;
}

Result<S3Config> ResolveS3Config(const S3Options& options, const EnvLookup& env) {
  S3Config config;
  const std::string profile_env = Get(env, "AWS_PROFILE");
  const std::string profile = !options.profile.empty() ? options.profile
                              : !profile_env.empty()   ? profile_env
                                                       : "default";
  const bool profile_named = !options.profile.empty() || !profile_env.empty();

  std::string cred_path = options.credentials_file;
  if (cred_path.empty()) cred_path = Get(env, "AWS_SHARED_CREDENTIALS_FILE");
  if (cred_path.empty()) cred_path = HomeFile(env, ".aws/credentials");
  std::string config_path = options.config_file;
  if (config_path.empty()) config_path = Get(env, "AWS_CONFIG_FILE");
  if (config_path.empty()) config_path = HomeFile(env, ".aws/config");

  IniFile cred_file, config_file;
  if (!cred_path.empty()) ReadIni(cred_path, &cred_file);
  if (!config_path.empty()) ReadIni(config_path, &config_file);
  const Section* cred_section = Find(cred_file, profile);
  const Section* config_section =
      Find(config_file, profile == "default" ? "default" : "profile " + profile);
  if (config_section == nullptr && profile != "default") {
    config_section = Find(config_file, profile);  // some tools write "[name]" there too
  }
  if (profile_named && profile != "default" && cred_section == nullptr &&
      config_section == nullptr) {
    return status::InvalidArgument(
        "AWS profile '", profile, "' not found in the shared credentials or config file");
  }

  // Credentials: the whole triple comes from one source, never mixed.
  if (!options.anonymous) {
    if (!options.access_key_id.empty() || !options.secret_access_key.empty()) {
      if (options.access_key_id.empty() || options.secret_access_key.empty()) {
        return status::InvalidArgument(
            "explicit S3 credentials need both an access key id and a secret key");
      }
      config.credentials = {options.access_key_id, options.secret_access_key,
                            options.session_token};
      config.credentials_source = "explicit options";
    } else if (!Get(env, "AWS_ACCESS_KEY_ID").empty() && !options.profile.size()) {
      config.credentials = {Get(env, "AWS_ACCESS_KEY_ID"),
                            Get(env, "AWS_SECRET_ACCESS_KEY"),
                            Get(env, "AWS_SESSION_TOKEN")};
      if (config.credentials.secret_access_key.empty()) {
        return status::InvalidArgument(
            "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
      }
      config.credentials_source = "environment";
    } else {
      for (const auto& [section, where] : {std::pair{cred_section, "credentials file"},
                                           {config_section, "config file"}}) {
        const std::string id = Value(section, "aws_access_key_id");
        if (id.empty()) continue;
        config.credentials = {id, Value(section, "aws_secret_access_key"),
                              Value(section, "aws_session_token")};
        if (config.credentials.secret_access_key.empty()) {
          return status::InvalidArgument("AWS profile '", profile, "' in the ", where,
                                         " has an access key id but no secret key");
        }
        config.credentials_source = "profile '" + profile + "' (" + where + ")";
        break;
      }
    }
  }
  if (config.credentials.empty()) config.credentials_source = "none (unsigned requests)";

  config.region = options.region;
  if (config.region.empty()) config.region = Get(env, "AWS_REGION");
  if (config.region.empty()) config.region = Get(env, "AWS_DEFAULT_REGION");
  if (config.region.empty()) config.region = Value(config_section, "region");
  if (config.region.empty()) config.region = "us-east-1";

  config.endpoint_url = options.endpoint_url;
  if (config.endpoint_url.empty()) config.endpoint_url = Get(env, "AWS_ENDPOINT_URL_S3");
  if (config.endpoint_url.empty()) config.endpoint_url = Get(env, "AWS_ENDPOINT_URL");
  if (config.endpoint_url.empty()) {
    config.endpoint_url = Value(config_section, "s3.endpoint_url");
  }
  if (config.endpoint_url.empty())
    config.endpoint_url = Value(config_section, "endpoint_url");
  config.custom_endpoint = !config.endpoint_url.empty();
  if (!config.custom_endpoint) {
    config.endpoint_url = "https://s3." + config.region + ".amazonaws.com";
  }
  while (!config.endpoint_url.empty() && config.endpoint_url.back() == '/') {
    config.endpoint_url.pop_back();
  }
  const size_t sep = config.endpoint_url.find("://");
  if (sep == std::string::npos ||
      (config.endpoint_url.compare(0, sep, "http") != 0 &&
       config.endpoint_url.compare(0, sep, "https") != 0) ||
      config.endpoint_url.find('/', sep + 3) != std::string::npos ||
      config.endpoint_url.find('@') != std::string::npos) {
    return status::InvalidArgument("S3 endpoint URL '", config.endpoint_url,
                                   "' must be http(s)://host[:port] without a path");
  }

  // Auto: virtual-hosted on AWS (its default since path style was deprecated), path
  // style on custom endpoints, which rarely have wildcard DNS for buckets.
  switch (options.addressing) {
    case Addressing::kPath:
      config.path_style = true;
      break;
    case Addressing::kVirtual:
      config.path_style = false;
      break;
    case Addressing::kAuto:
      config.path_style = config.custom_endpoint;
      break;
  }
  return config;
}

std::string S3ObjectUrl(const S3Config& config, const std::string& bucket,
                        const std::string& key) {
  // Unreserved characters and '/' stay; SigV4 signs the path exactly as encoded here.
  const std::string encoded = PercentEncode(key, [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/';
  });
  // Virtual-hosted needs a DNS-label bucket; others fall back to path style.
  if (config.path_style || !IsDnsCompatibleBucket(bucket)) {
    return config.endpoint_url + "/" + bucket + "/" + encoded;
  }
  const size_t host = config.endpoint_url.find("://") + 3;
  return config.endpoint_url.substr(0, host) + bucket + "." +
         config.endpoint_url.substr(host) + "/" + encoded;
}

}  // namespace stoker::io
