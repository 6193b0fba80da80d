#include "stoker/text/rope.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace stoker::text {
namespace {

// The spec's §14.1 worked example: 26 tokens, <|vision_start|> at 14, four image
// tokens (grid (1, 4, 4)) at 15..18.
std::vector<int64_t> ExampleIds() {
  std::vector<int64_t> ids(26, 100);
  ids[14] = kVisionStartId;
  for (int i = 15; i < 19; ++i) ids[i] = kImagePadId;
  ids[19] = 151653;
  return ids;
}

TEST(MRopeTest, SpecWorkedExample) {
  std::vector<int64_t> pos;
  int64_t delta = 0;
  ASSERT_TRUE(MRopePositions(ExampleIds(), {{1, 4, 4}}, {}, &pos, &delta).ok());
  const std::vector<int64_t> t(pos.begin(), pos.begin() + 26);
  const std::vector<int64_t> h(pos.begin() + 26, pos.begin() + 52);
  const std::vector<int64_t> w(pos.begin() + 52, pos.end());
  std::vector<int64_t> want_t(15);
  std::iota(want_t.begin(), want_t.end(), 0);
  std::vector<int64_t> want_h = want_t, want_w = want_t;
  want_t.insert(want_t.end(), {15, 15, 15, 15});
  want_h.insert(want_h.end(), {15, 15, 16, 16});
  want_w.insert(want_w.end(), {15, 16, 15, 16});
  for (int64_t p = 17; p <= 23; ++p) {
    want_t.push_back(p);
    want_h.push_back(p);
    want_w.push_back(p);
  }
  EXPECT_EQ(t, want_t);
  EXPECT_EQ(h, want_h);
  EXPECT_EQ(w, want_w);
  EXPECT_EQ(delta, -2);
}

TEST(MRopeTest, TextOnlyIsArange) {
  std::vector<int64_t> pos;
  int64_t delta = 1;
  ASSERT_TRUE(MRopePositions(std::vector<int64_t>(5, 7), {}, {}, &pos, &delta).ok());
  EXPECT_EQ(pos, (std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
  EXPECT_EQ(delta, 0);
}

TEST(MRopeTest, WideImageResumesAfterItsLongerSide) {
  // vision_start, 1x(2x6)/... grid (1, 4, 12): 2 rows x 6 columns of merged tokens.
  std::vector<int64_t> ids = {1, kVisionStartId};
  ids.insert(ids.end(), 12, kImagePadId);
  ids.push_back(151653);
  std::vector<int64_t> pos;
  int64_t delta = 0;
  ASSERT_TRUE(MRopePositions(ids, {{1, 4, 12}}, {}, &pos, &delta).ok());
  const size_t n = ids.size();
  EXPECT_EQ(pos[14], 2 + 6);            // vision_end: start (2) + max(2, 6)
  EXPECT_EQ(pos[n + 2 + 11], 2 + 1);    // last pad, height row
  EXPECT_EQ(pos[2 * n + 2 + 11], 2 + 5);  // last pad, width row
}

TEST(MRopeTest, Errors) {
  std::vector<int64_t> pos;
  int64_t delta;
  EXPECT_FALSE(MRopePositions(ExampleIds(), {}, {}, &pos, &delta).ok());
  EXPECT_FALSE(MRopePositions(ExampleIds(), {{1, 8, 8}}, {}, &pos, &delta).ok());
}

TEST(MRopeTest, PackRestartsTextRowPerSample) {
  const std::vector<int64_t> a = {0, 1, 0, 1, 0, 1};     // 3 x 2
  const std::vector<int64_t> b = {5, 6, 7, 5, 6, 7, 5, 6, 7};  // 3 x 3
  const std::vector<int64_t> packed = PackPositions({a, b});
  EXPECT_EQ(packed, (std::vector<int64_t>{0, 1, 0, 1, 2,   // text row
                                          0, 1, 5, 6, 7,   // t
                                          0, 1, 5, 6, 7,   // h
                                          0, 1, 5, 6, 7}));  // w
}

}  // namespace
}  // namespace stoker::text
