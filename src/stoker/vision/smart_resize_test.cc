#include "stoker/vision/smart_resize.h"

#include <gtest/gtest.h>

namespace stoker::vision {
namespace {

struct Vector {
  int64_t h, w;
  int64_t qwen2_h, qwen2_w;      // factor 28, 3136 .. 12845056 (hub config)
  int64_t default_h, default_w;  // factor 28, 3136 .. 1003520 (class defaults)
  int64_t qwen3_h, qwen3_w;      // factor 32, 65536 .. 16777216
};

// The reference's published table (includes the ties 70 -> 56 and 14 -> 0 -> min branch).
constexpr Vector kVectors[] = {
    {480, 640, 476, 644, 476, 644, 480, 640},
    {1080, 1920, 1092, 1932, 728, 1316, 1088, 1920},
    {300, 400, 308, 392, 308, 392, 288, 384},
    {42, 42, 56, 56, 56, 56, 256, 256},
    {70, 70, 56, 56, 56, 56, 256, 256},
    {14, 2800, 28, 812, 28, 812, 32, 3648},
    {4000, 3000, 4004, 2996, 1148, 840, 4000, 3008},
    {250, 250, 252, 252, 252, 252, 256, 256},
    {126, 98, 112, 112, 112, 112, 320, 256},
};

TEST(SmartResizeTest, MatchesReferenceTable) {
  for (const Vector& v : kVectors) {
    SCOPED_TRACE(testing::Message() << v.h << "x" << v.w);
    auto a = SmartResize(v.h, v.w, 28, 3136, 12845056);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->height, v.qwen2_h);
    EXPECT_EQ(a->width, v.qwen2_w);
    auto b = SmartResize(v.h, v.w, 28, 3136, 1003520);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->height, v.default_h);
    EXPECT_EQ(b->width, v.default_w);
    auto c = SmartResize(v.h, v.w, 32, 65536, 16777216);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->height, v.qwen3_h);
    EXPECT_EQ(c->width, v.qwen3_w);
  }
}

TEST(SmartResizeTest, TiesRoundToEven) {
  // 70 / 28 = 2.5 -> 2 and 42 / 28 = 1.5 -> 2; with no min limit the tie decides.
  auto r = SmartResize(70, 42, 28, 0, 1 << 30);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->height, 56);
  EXPECT_EQ(r->width, 56);
  auto s = SmartResize(98, 98, 28, 0, 1 << 30);  // 3.5 -> 4
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->height, 112);
}

TEST(SmartResizeTest, MaxBranchClampsToFactor) {
  // 6000 x 30 (ratio 200) shrunk to a tiny budget: the short side would floor to 0.
  auto r = SmartResize(6000, 30, 28, 0, 28 * 28 * 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->width, 28);
}

TEST(SmartResizeTest, QwenVlUtilsClampsBeforeAreaTest) {
  // 10 x 10: HF rounds to 0 x 0 and takes the min branch; qwen-vl-utils clamps to 28 x 28
  // first (area 784 < 3136, then the min branch too).
  auto hf = SmartResize(10, 10, 28, 3136, 12845056);
  auto utils = SmartResize(10, 10, 28, 3136, 12845056, SmartResizeRule::kQwenVlUtils);
  ASSERT_TRUE(hf.ok() && utils.ok());
  EXPECT_EQ(hf->height, 56);
  EXPECT_EQ(utils->height, 56);
  // With no minimum the difference shows: HF would give 0, qwen-vl-utils 28.
  auto utils_nomin = SmartResize(10, 10, 28, 0, 12845056, SmartResizeRule::kQwenVlUtils);
  ASSERT_TRUE(utils_nomin.ok());
  EXPECT_EQ(utils_nomin->height, 28);
  EXPECT_FALSE(SmartResize(10, 10, 28, 0, 12845056).ok());  // HF: empty result refused
}

TEST(SmartResizeTest, RefusesBadShapes) {
  EXPECT_EQ(SmartResize(0, 10, 28, 3136, 1003520).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SmartResize(10, 2001, 28, 3136, 1003520).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(SmartResize(10, 2000, 28, 3136, 1003520).ok());  // exactly 200 is allowed
}

}  // namespace
}  // namespace stoker::vision
