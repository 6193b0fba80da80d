#include "stoker/io/retry.h"

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

namespace stoker::io {
namespace {

struct HttpCase {
  int status;
  const char* code;
  RetryClass expected;
};

TEST(RetryClassify, HttpTable) {
  const HttpCase cases[] = {
      {200, "", RetryClass::kSuccess},
      {206, "", RetryClass::kSuccess},
      {500, "", RetryClass::kTransient},
      {500, "InternalError", RetryClass::kTransient},
      {502, "", RetryClass::kTransient},
      {503, "", RetryClass::kTransient},
      {504, "", RetryClass::kTransient},
      {400, "RequestTimeout", RetryClass::kTransient},
      {400, "RequestTimeoutException", RetryClass::kTransient},
      {400, "PriorRequestNotComplete", RetryClass::kThrottle},
      {503, "SlowDown", RetryClass::kThrottle},
      {400, "Throttling", RetryClass::kThrottle},
      {400, "ThrottlingException", RetryClass::kThrottle},
      {400, "TooManyRequestsException", RetryClass::kThrottle},
      {400, "RequestLimitExceeded", RetryClass::kThrottle},
      {509, "BandwidthLimitExceeded", RetryClass::kThrottle},
      {403, "RequestThrottled", RetryClass::kThrottle},
      {429, "", RetryClass::kThrottle},
      {408, "", RetryClass::kTransient},
      {400, "", RetryClass::kPermanent},
      {400, "NotAThrottlingError", RetryClass::kPermanent},
      {403, "AccessDenied", RetryClass::kPermanent},
      {403, "", RetryClass::kPermanent},
      {404, "NoSuchKey", RetryClass::kPermanent},
      {404, "NoSuchBucket", RetryClass::kPermanent},
      {412, "PreconditionFailed", RetryClass::kPermanent},
      {416, "InvalidRange", RetryClass::kPermanent},
      {301, "PermanentRedirect", RetryClass::kPermanent},
  };
  for (const HttpCase& c : cases) {
    SCOPED_TRACE(std::to_string(c.status) + " " + c.code);
    const Classification got = ClassifyHttp(c.status, c.code);
    EXPECT_EQ(got.retry_class, c.expected);
  }
  EXPECT_EQ(ClassifyHttp(503, "SlowDown").reason, "http_503_SlowDown");
  EXPECT_EQ(ClassifyHttp(500, "").reason, "http_500");
}

TEST(RetryClassify, CurlTable) {
  const std::pair<CURLcode, RetryClass> cases[] = {
      {CURLE_OK, RetryClass::kSuccess},
      {CURLE_COULDNT_CONNECT, RetryClass::kTransient},
      {CURLE_OPERATION_TIMEDOUT, RetryClass::kTransient},
      {CURLE_RECV_ERROR, RetryClass::kTransient},
      {CURLE_SEND_ERROR, RetryClass::kTransient},
      {CURLE_GOT_NOTHING, RetryClass::kTransient},
      {CURLE_PARTIAL_FILE, RetryClass::kTransient},
      {CURLE_PEER_FAILED_VERIFICATION, RetryClass::kPermanent},
      {CURLE_UNSUPPORTED_PROTOCOL, RetryClass::kPermanent},
      {CURLE_URL_MALFORMAT, RetryClass::kPermanent},
      {CURLE_WRITE_ERROR, RetryClass::kPermanent},
      {CURLE_BAD_FUNCTION_ARGUMENT, RetryClass::kPermanent},
  };
  for (const auto& [code, expected] : cases) {
    SCOPED_TRACE(curl_easy_strerror(code));
    EXPECT_EQ(ClassifyCurl(code).retry_class, expected);
  }
  EXPECT_EQ(ClassifyCurl(CURLE_OPERATION_TIMEDOUT).reason, "timeout");
}

TEST(RetryBackoff, ExactWithFakeRandom) {
  RetryOptions options;
  // random = 1 gives the ceiling: base * 2^(i-1), capped at 20 s.
  const double transient[] = {0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 20, 20};
  for (int i = 1; i <= 11; ++i) {
    SCOPED_TRACE(i);
    EXPECT_DOUBLE_EQ(BackoffSeconds(options, RetryClass::kTransient, i, 1.0),
                     transient[i - 1]);
  }
  const double throttle[] = {1, 2, 4, 8, 16, 20, 20};
  for (int i = 1; i <= 7; ++i) {
    EXPECT_DOUBLE_EQ(BackoffSeconds(options, RetryClass::kThrottle, i, 1.0),
                     throttle[i - 1]);
  }
  EXPECT_DOUBLE_EQ(BackoffSeconds(options, RetryClass::kTransient, 4, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(BackoffSeconds(options, RetryClass::kTransient, 4, 0.5), 0.2);
  EXPECT_DOUBLE_EQ(BackoffSeconds(options, RetryClass::kTransient, 1000, 1.0), 20.0);
}

TEST(RetryBackoff, FullJitterIsUniform) {
  RetryOptions options;
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  constexpr int kSamples = 10000, kBins = 10;
  int bins[kBins] = {};
  for (int i = 0; i < kSamples; ++i) {
    const double d = BackoffSeconds(options, RetryClass::kTransient, 10, unit(rng));
    ASSERT_GE(d, 0.0);
    ASSERT_LE(d, 20.0);
    bins[std::min(kBins - 1, static_cast<int>(d / 20.0 * kBins))]++;
  }
  for (int b : bins) {
    EXPECT_GT(b, kSamples / kBins * 0.8);  // within ±20% of uniform
    EXPECT_LT(b, kSamples / kBins * 1.2);
  }
}

TEST(RetryBudgetTest, TokenArithmetic) {
  RetryOptions options;
  RetryBudget budget(options);
  EXPECT_EQ(budget.available(), 500);
  EXPECT_EQ(budget.Acquire(RetryClass::kTransient), 14);
  EXPECT_EQ(budget.available(), 486);
  EXPECT_EQ(budget.Acquire(RetryClass::kThrottle), 5);
  EXPECT_EQ(budget.available(), 481);
  budget.OnSuccess(19);  // success after retries refunds what they took
  EXPECT_EQ(budget.available(), 500);
  budget.OnSuccess(0);  // never above the capacity
  EXPECT_EQ(budget.available(), 500);
  EXPECT_EQ(budget.Acquire(RetryClass::kTransient), 14);
  budget.OnSuccess(0);  // first-try success refunds 1
  EXPECT_EQ(budget.available(), 487);
}

TEST(RetryBudgetTest, EmptyBudgetFailsFastAndFailuresRefundNothing) {
  RetryOptions options;
  options.budget_tokens = 30;
  RetryBudget budget(options);
  EXPECT_EQ(budget.Acquire(RetryClass::kTransient), 14);
  EXPECT_EQ(budget.Acquire(RetryClass::kTransient), 14);
  EXPECT_EQ(budget.Acquire(RetryClass::kTransient), 0);  // 2 left: cannot pay 14
  EXPECT_EQ(budget.Acquire(RetryClass::kThrottle), 0);
  EXPECT_EQ(budget.available(), 2);  // failed requests gave nothing back
}

TEST(RetryBudgetTest, ThreadSafe) {
  RetryOptions options;
  options.budget_tokens = 14 * 1000;
  RetryBudget budget(options);
  std::vector<std::thread> threads;
  std::atomic<int> taken{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i)
        taken += budget.Acquire(RetryClass::kTransient) ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(taken.load(), 1000);
  EXPECT_EQ(budget.available(), 0);
}

}  // namespace
}  // namespace stoker::io
