#include "stoker/io/retry.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>

namespace stoker::io {

namespace {

bool IsThrottleCode(std::string_view code) {
  static constexpr std::string_view kCodes[] = {"Throttling",
                                                "ThrottlingException",
                                                "ThrottledException",
                                                "RequestThrottledException",
                                                "TooManyRequestsException",
                                                "ProvisionedThroughputExceededException",
                                                "TransactionInProgressException",
                                                "RequestLimitExceeded",
                                                "BandwidthLimitExceeded",
                                                "LimitExceededException",
                                                "RequestThrottled",
                                                "SlowDown",
                                                "PriorRequestNotComplete",
                                                "EC2ThrottledException"};
  return std::find(std::begin(kCodes), std::end(kCodes), code) != std::end(kCodes);
}

bool IsTransientCode(std::string_view code) {
  static constexpr std::string_view kCodes[] = {
      "RequestTimeout", "RequestTimeoutException", "InternalError", "ServiceUnavailable"};
  return std::find(std::begin(kCodes), std::end(kCodes), code) != std::end(kCodes);
}

Classification Make(RetryClass c, std::string reason) { return {c, std::move(reason)}; }

}  // namespace

Classification ClassifyHttp(int http_status, std::string_view error_code) {
  std::string reason = "http_" + std::to_string(http_status);
  if (!error_code.empty()) {
    reason += "_";
    reason += error_code;
  }
  if (http_status >= 200 && http_status < 300) return Make(RetryClass::kSuccess, reason);
  // The code decides first: a throttle is a throttle whatever status carries it
  // (403 RequestThrottled, 503 SlowDown, 400 Throttling).
  if (IsThrottleCode(error_code)) return Make(RetryClass::kThrottle, reason);
  if (http_status == 429 || http_status == 509) {
    return Make(RetryClass::kThrottle, reason);
  }
  if (IsTransientCode(error_code)) return Make(RetryClass::kTransient, reason);
  if (http_status >= 500 && http_status < 600) {
    return Make(RetryClass::kTransient, reason);
  }
  if (http_status == 408) return Make(RetryClass::kTransient, reason);
  return Make(RetryClass::kPermanent, reason);
}

Classification ClassifyCurl(int curl_code) {
  switch (static_cast<CURLcode>(curl_code)) {
    case CURLE_OK:
      return Make(RetryClass::kSuccess, "ok");
    case CURLE_OPERATION_TIMEDOUT:
      return Make(RetryClass::kTransient, "timeout");
    case CURLE_COULDNT_CONNECT:
      return Make(RetryClass::kTransient, "connect_failed");
    case CURLE_COULDNT_RESOLVE_HOST:
      return Make(RetryClass::kTransient, "dns_failed");
    case CURLE_RECV_ERROR:
      return Make(RetryClass::kTransient, "recv_error");
    case CURLE_SEND_ERROR:
      return Make(RetryClass::kTransient, "send_error");
    case CURLE_GOT_NOTHING:
      return Make(RetryClass::kTransient, "empty_reply");
    case CURLE_PARTIAL_FILE:
      return Make(RetryClass::kTransient, "short_body");
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return Make(RetryClass::kTransient, "http2_error");
    case CURLE_SSL_CONNECT_ERROR:
      return Make(RetryClass::kTransient, "tls_connect_error");
    case CURLE_PEER_FAILED_VERIFICATION:
      return Make(RetryClass::kPermanent, "tls_verification_failed");
    case CURLE_SSL_CACERT_BADFILE:
      return Make(RetryClass::kPermanent, "tls_bad_ca_file");
    case CURLE_WEIRD_SERVER_REPLY:
      return Make(RetryClass::kPermanent, "bad_reply");
    case CURLE_UNSUPPORTED_PROTOCOL:
      return Make(RetryClass::kPermanent, "unsupported_protocol");
    case CURLE_URL_MALFORMAT:
      return Make(RetryClass::kPermanent, "malformed_url");
    case CURLE_WRITE_ERROR:
      return Make(RetryClass::kPermanent, "write_aborted");
    case CURLE_OUT_OF_MEMORY:
      return Make(RetryClass::kPermanent, "out_of_memory");
    default:
      break;
  }
  return Make(RetryClass::kPermanent, std::string("curl_") + std::to_string(curl_code));
}

double BackoffSeconds(const RetryOptions& options, RetryClass retry_class, int attempt,
                      double unit_random) {
  const double base = retry_class == RetryClass::kThrottle ? options.throttle_base_s
                                                           : options.transient_base_s;
  const int exponent = std::clamp(attempt - 1, 0, 62);
  const double ceiling =
      std::min(options.max_backoff_s, base * std::ldexp(1.0, exponent));
  return std::clamp(unit_random, 0.0, 1.0) * ceiling;
}

RetryBudget::RetryBudget(const RetryOptions& options)
    : options_(options), tokens_(options.budget_tokens) {}

int RetryBudget::Acquire(RetryClass retry_class) {
  const int cost = retry_class == RetryClass::kThrottle ? options_.throttle_cost
                                                        : options_.transient_cost;
  std::lock_guard lock(mutex_);
  if (cost > tokens_) return 0;
  tokens_ -= cost;
  return cost;
}

void RetryBudget::OnSuccess(int tokens_taken) {
  std::lock_guard lock(mutex_);
  const int refund = tokens_taken > 0 ? tokens_taken : options_.success_refund;
  tokens_ = std::min(options_.budget_tokens, tokens_ + refund);
}

int RetryBudget::available() const {
  std::lock_guard lock(mutex_);
  return tokens_;
}

}  // namespace stoker::io
