#include "stoker/core/status.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status st;
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kOk);
  EXPECT_EQ(st.message(), "");
  EXPECT_EQ(st.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status st = status::CorruptImage("JPEG: bad ", "marker");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kCorruptImage);
  EXPECT_EQ(st.message(), "JPEG: bad marker");
  EXPECT_EQ(st.ToString(), "CorruptImage: JPEG: bad marker");
}

TEST(StatusTest, WithContextPrefixesErrorsAndKeepsOk) {
  EXPECT_TRUE(Status::OK().WithContext("x").ok());
  Status st = status::NotFound("no such file").WithContext("train.jsonl:3");
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "train.jsonl:3: no such file");
}

TEST(StatusTest, OkStatusAsErrorIsInternal) {
  Result<int> r{Status::OK()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

Result<int> Half(int x) {
  if (x % 2 != 0) return status::InvalidArgument("odd: ", std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  STOKER_ASSIGN_OR_RETURN(int half, Half(x));
  STOKER_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status CheckEven(int x) {
  STOKER_RETURN_NOT_OK(Half(x).status());
  return Status::OK();
}

TEST(ResultTest, MacrosPropagate) {
  ASSERT_TRUE(Quarter(8).ok());
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd: 3");
  EXPECT_TRUE(CheckEven(2).ok());
  EXPECT_EQ(CheckEven(3).code(), StatusCode::kInvalidArgument);
}

TEST(StatusTest, EveryCodeHasAName) {
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    EXPECT_NE(StatusCodeName(static_cast<StatusCode>(c)), "Unknown") << c;
  }
}

}  // namespace
}  // namespace stoker
