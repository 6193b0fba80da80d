// Retry policy for object reads: which failures are retried, how long to wait, and a
// budget shared by every request to one store so that an outage fails fast instead of
// multiplying the load by the attempt count.
//
// The shape and the numbers follow the "standard" mode of the AWS SDKs: classify, check
// max attempts, take tokens from the budget, back off with full jitter.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace stoker::io {

enum class RetryClass {
  kSuccess,    // nothing to retry
  kTransient,  // 5xx, timeouts, resets, short bodies: retried with the transient base
  kThrottle,   // 429, SlowDown and friends: retried with the (longer) throttle base
  kPermanent,  // 4xx, TLS verification, malformed URL: never retried
};

struct Classification {
  RetryClass retry_class = RetryClass::kSuccess;
  // A short stable name for metrics and errors: "http_503_SlowDown", "timeout", ...
  std::string reason;
  bool retryable() const {
    return retry_class == RetryClass::kTransient || retry_class == RetryClass::kThrottle;
  }
};

// Classifies an HTTP response by status and S3 error code (the <Code> of the error
// body, empty when none). The code matters as much as the status: 403 RequestThrottled
// is a throttle, 403 AccessDenied is not.
Classification ClassifyHttp(int http_status, std::string_view error_code);

// Classifies a libcurl transfer result (a CURLcode, passed as int to keep curl.h out
// of headers) for a transfer that got no usable HTTP response.
Classification ClassifyCurl(int curl_code);

struct RetryOptions {
  int max_attempts = 5;            // first try included; 1 disables retries
  double transient_base_s = 0.05;  // backoff base for transient errors
  double throttle_base_s = 1.0;    // backoff base for throttling
  double max_backoff_s = 20.0;     // cap of every backoff
  int budget_tokens = 500;         // shared retry budget (per store)
  int transient_cost = 14;         // tokens a transient retry takes
  int throttle_cost = 5;           // tokens a throttle retry takes
  int success_refund = 1;          // tokens a first-try success gives back
};

// Full-jitter exponential backoff: uniform in [0, min(cap, base * 2^(attempt-1))].
// `attempt` is the number of the attempt that just failed (1 for the first try);
// `unit_random` is in [0, 1).
double BackoffSeconds(const RetryOptions& options, RetryClass retry_class, int attempt,
                      double unit_random);

// The shared retry budget (a token bucket without refill over time: successes refill
// it). Thread-safe.
class RetryBudget {
 public:
  explicit RetryBudget(const RetryOptions& options);

  // Takes the cost of one retry of `retry_class`; returns the tokens taken, or 0 when
  // the budget cannot pay (the caller then fails at once, without sleeping).
  int Acquire(RetryClass retry_class);
  // A request succeeded. `tokens_taken` is what its retries took (0 when it succeeded
  // on the first try, which refunds `success_refund`).
  void OnSuccess(int tokens_taken);
  int available() const;

 private:
  const RetryOptions options_;
  mutable std::mutex mutex_;
  int tokens_;
};

}  // namespace stoker::io
