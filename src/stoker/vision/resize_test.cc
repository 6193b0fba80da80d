#include "stoker/vision/resize.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <random>
#include <vector>

namespace stoker::vision {
namespace {

struct Tap {
  int start;
  std::vector<int32_t> weights;
};

void ExpectTaps(ResizeBackend backend, int in, int out, const std::vector<Tap>& expected) {
  AxisTaps taps;
  PlanAxis(backend, in, out, &taps);
  ASSERT_EQ(taps.out_size, static_cast<int>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(testing::Message() << in << "->" << out << " sample " << i);
    EXPECT_EQ(taps.start[i], expected[i].start);
    ASSERT_EQ(taps.count[i], static_cast<int>(expected[i].weights.size()));
    for (size_t j = 0; j < expected[i].weights.size(); ++j) {
      EXPECT_EQ(taps.weights[i * taps.max_taps + j], expected[i].weights[j]);
    }
  }
}

// Coefficient vectors produced by Pillow 9.4.0 (reference spec §6.8).
TEST(ResizeTest, PillowCoefficients) {
  ExpectTaps(ResizeBackend::kPillow, 6, 3,
             {{0, {1947982, 1947982, 508932, -157945, -52648}},
              {0, {-144079, 464255, 1776976, 1776976, 464255, -144079}},
              {1, {-52648, -157945, 508932, 1947982, 1947982}}});
  ExpectTaps(ResizeBackend::kPillow, 4, 7,
             {{0, {4527025, -332721}},
              {0, {2927401, 1427046, -160142}},
              {0, {189853, 4133307, -128856}},
              {0, {-262144, 2359296, 2359296, -262144}},
              {1, {-128856, 4133307, 189853}},
              {1, {-160142, 1427046, 2927401}},
              {2, {-332721, 4527025}}});
  ExpectTaps(ResizeBackend::kPillow, 10, 4,
             {{0, {1475606, 1766927, 1017815, 123947, -132995, -56998}},
              {0, {-121778, 113494, 931976, 1617909, 1351157, 479657, -67102, -103553, -7456}},
              {1, {-7456, -103553, -67102, 479657, 1351157, 1617909, 931976, 113494, -121778}},
              {4, {-56998, -132995, 123947, 1017815, 1766927, 1475606}}});
}

TEST(ResizeTest, TorchvisionPrecisionAndCoefficients) {
  AxisTaps taps;
  PlanAxis(ResizeBackend::kTorchvision, 6, 3, &taps);
  EXPECT_EQ(taps.precision, 16);
  const std::vector<int32_t> first = {30437, 30437, 7952, -2468, -823};
  EXPECT_EQ(taps.start[0], 0);
  ASSERT_EQ(taps.count[0], 5);
  for (int j = 0; j < 5; ++j) EXPECT_EQ(taps.weights[j], first[j]);
  // The filter is symmetric: the last sample mirrors the first.
  EXPECT_EQ(taps.start[2], 1);
  for (int j = 0; j < 5; ++j) EXPECT_EQ(taps.weights[2 * taps.max_taps + j], first[4 - j]);
  PlanAxis(ResizeBackend::kTorchvision, 4, 7, &taps);
  EXPECT_EQ(taps.precision, 14);
  EXPECT_EQ(taps.weights[0], 17684);
  EXPECT_EQ(taps.weights[1], -1300);
  PlanAxis(ResizeBackend::kTorchvision, 1920, 1316, &taps);
  EXPECT_EQ(taps.precision, 15);
}

// The 6 x 4 test image of the spec: R = (40x + 10y) mod 256, G = (255 - 37x) mod 256,
// B = 23xy mod 256.
std::vector<uint8_t> SpecImage() {
  std::vector<uint8_t> img(6 * 4 * 3);
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 6; ++x) {
      uint8_t* p = &img[(y * 6 + x) * 3];
      p[0] = static_cast<uint8_t>((40 * x + 10 * y) % 256);
      p[1] = static_cast<uint8_t>(((255 - 37 * x) % 256 + 256) % 256);
      p[2] = static_cast<uint8_t>((23 * x * y) % 256);
    }
  }
  return img;
}

std::vector<int> Channel(const std::vector<uint8_t>& img, int c) {
  std::vector<int> out;
  for (size_t i = c; i < img.size(); i += 3) out.push_back(img[i]);
  return out;
}

TEST(ResizeTest, PillowImageVectors) {
  const std::vector<uint8_t> src = SpecImage();
  ResizeScratch scratch;
  ResizeOptions options;
  options.backend = ResizeBackend::kPillow;
  for (bool scalar : {true, false}) {
    options.force_scalar = scalar;
    std::vector<uint8_t> small(3 * 2 * 3);
    ResizeRgb(src.data(), 6, 4, small.data(), 3, 2, options, scratch);
    EXPECT_EQ(Channel(small, 0), (std::vector<int>{28, 106, 184, 46, 124, 202}));
    EXPECT_EQ(Channel(small, 1), (std::vector<int>{235, 163, 90, 235, 163, 90}));
    EXPECT_EQ(Channel(small, 2), (std::vector<int>{7, 35, 69, 32, 130, 138}));

    std::vector<uint8_t> big(9 * 5 * 3);
    ResizeRgb(src.data(), 6, 4, big.data(), 9, 5, options, scratch);
    EXPECT_EQ(Channel(big, 0),
              (std::vector<int>{0,  16, 47, 73,  100, 127, 153, 184, 203, 4,  22, 53,
                                79, 106, 133, 159, 190, 209, 12, 31, 62,  88, 115, 142,
                                168, 199, 218, 21, 40, 71, 97,  124, 151, 177, 208, 227,
                                27, 46, 77, 103, 130, 157, 183, 214, 233}));
    std::vector<int> g;
    for (int y = 0; y < 5; ++y) {
      for (int v : {255, 240, 212, 187, 163, 138, 113, 85, 68}) g.push_back(v);
    }
    EXPECT_EQ(Channel(big, 1), g);
    EXPECT_EQ(Channel(big, 2),
              (std::vector<int>{0, 0,  0,  0,  0,   0,   0,   0,   0,   0, 6,  17, 27, 38, 47,
                                57, 69, 76, 0, 14, 41, 63, 86,  111, 146, 175, 191, 0,  22, 64,
                                99, 140, 163, 144, 172, 202, 0, 28, 82, 128, 192, 190, 33, 39, 88}));
  }
}

TEST(ResizeTest, PillowPassOrderRules) {
  using O = PillowPassOrder;
  EXPECT_FALSE(PillowVerticalFirst(O::kHorizontalFirst, 10, 4000, 8, 3000));
  EXPECT_TRUE(PillowVerticalFirst(O::kTallVerticalFirst, 10, 4000, 8, 3000));
  EXPECT_FALSE(PillowVerticalFirst(O::kTallVerticalFirst, 640, 480, 644, 476));
  // Pillow 13, measured: 640x480 -> 644x476 runs vertically first; a square 200 -> 50
  // high switches to vertical first once the width keeps more than 125 columns.
  EXPECT_TRUE(PillowVerticalFirst(O::kReductionBased, 640, 480, 644, 476));
  EXPECT_FALSE(PillowVerticalFirst(O::kReductionBased, 200, 200, 125, 50));
  EXPECT_TRUE(PillowVerticalFirst(O::kReductionBased, 200, 200, 126, 50));
  EXPECT_FALSE(PillowVerticalFirst(O::kReductionBased, 100, 100, 200, 150));  // height grows
}

TEST(ResizeTest, UnchangedSizeCopies) {
  const std::vector<uint8_t> src = SpecImage();
  std::vector<uint8_t> out(src.size());
  ResizeScratch scratch;
  ResizeRgb(src.data(), 6, 4, out.data(), 6, 4, ResizeOptions{}, scratch);
  EXPECT_EQ(out, src);
}

// The SIMD passes must equal the scalar reference byte for byte, for every SIMD
// target compiled in that this CPU can run.
void ExpectSimdEqualsScalar(uint32_t seed, int iterations) {
  std::mt19937 rng(seed);
  ResizeScratch scratch_a, scratch_b;
  for (int iter = 0; iter < iterations; ++iter) {
    const int w = 1 + static_cast<int>(rng() % 150);
    const int h = 1 + static_cast<int>(rng() % 120);
    const int ow = 1 + static_cast<int>(rng() % 170);
    const int oh = 1 + static_cast<int>(rng() % 140);
    std::vector<uint8_t> src(static_cast<size_t>(w) * h * 3);
    // Mix noise and flat areas so clipping at 0 and 255 is exercised.
    for (auto& v : src) v = (rng() % 4 == 0) ? static_cast<uint8_t>((rng() % 2) * 255)
                                            : static_cast<uint8_t>(rng());
    for (ResizeBackend backend : {ResizeBackend::kPillow, ResizeBackend::kTorchvision}) {
      ResizeOptions scalar{backend, PillowPassOrder::kReductionBased, true};
      ResizeOptions fast{backend, PillowPassOrder::kReductionBased, false};
      std::vector<uint8_t> a(static_cast<size_t>(ow) * oh * 3), b(a.size());
      ResizeRgb(src.data(), w, h, a.data(), ow, oh, scalar, scratch_a);
      ResizeRgb(src.data(), w, h, b.data(), ow, oh, fast, scratch_b);
      ASSERT_EQ(a, b) << w << "x" << h << " -> " << ow << "x" << oh;
    }
  }
}

TEST(ResizeTest, SimdEqualsScalarOnRandomImages) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    SCOPED_TRACE(testing::Message() << "Highway target " << hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    ExpectSimdEqualsScalar(static_cast<uint32_t>(1234 + target % 1000), 150);
  }
  hwy::SetSupportedTargetsForTest(0);  // back to what the CPU supports
}

// The SIMD horizontal pass on its own, for widths with many full groups of taps and
// row counts down to one (the last row must not read past the end of the image), at
// up- and downscales from about 1/5 to 5.
TEST(ResizeTest, SimdHorizontalPassEqualsScalar) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  for (int64_t target : targets) {
    SCOPED_TRACE(testing::Message() << "Highway target " << hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    std::mt19937 rng(static_cast<uint32_t>(99 + target % 1000));
    for (int iter = 0; iter < 60; ++iter) {
      const int w = 1 + static_cast<int>(rng() % 700);
      const int rows = 1 + static_cast<int>(rng() % 4);
      // Every other case near scale 1 (a few columns more or fewer), where groups of
      // output pixels read consecutive inputs and take the gather-free path.
      const double scale = 0.2 + (rng() % 1000) / 1000.0 * 4.8;
      const int ow = iter % 2 ? std::max(1, w + static_cast<int>(rng() % 9) - 4)
                              : std::max(1, static_cast<int>(w * scale));
      std::vector<uint8_t> src(static_cast<size_t>(w) * rows * 3);
      for (auto& v : src) v = (rng() % 4 == 0) ? static_cast<uint8_t>((rng() % 2) * 255)
                                              : static_cast<uint8_t>(rng());
      for (ResizeBackend backend : {ResizeBackend::kPillow, ResizeBackend::kTorchvision}) {
        AxisTaps taps;
        PlanAxis(backend, w, ow, &taps);
        std::vector<uint8_t> a(static_cast<size_t>(ow) * rows * 3), b(a.size());
        HorizontalPassScalar(src.data(), rows, 3, taps, a.data());
        HorizontalPass(src.data(), rows, 3, taps, b.data());
        ASSERT_EQ(a, b) << w << " -> " << ow << " x " << rows << " rows";
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// RowResizer hands out exactly ResizeRgb's rows, whatever the band heights, for both
// backends and both of Pillow's pass orders, with and without SIMD.
TEST(ResizeTest, RowResizerBandsEqualWholeResize) {
  std::mt19937 rng(4321);
  ResizeScratch whole_scratch, band_scratch;
  for (int iter = 0; iter < 120; ++iter) {
    const int w = 1 + static_cast<int>(rng() % 200);
    const int h = 1 + static_cast<int>(rng() % 200);
    const int ow = (iter % 5 == 0) ? w : 1 + static_cast<int>(rng() % 220);
    const int oh = (iter % 7 == 0) ? h : 1 + static_cast<int>(rng() % 220);
    std::vector<uint8_t> src(static_cast<size_t>(w) * h * 3);
    for (auto& v : src) v = static_cast<uint8_t>(rng());
    for (ResizeBackend backend : {ResizeBackend::kPillow, ResizeBackend::kTorchvision}) {
      for (bool scalar : {true, false}) {
        ResizeOptions options{backend, PillowPassOrder::kReductionBased, scalar};
        std::vector<uint8_t> want(static_cast<size_t>(ow) * oh * 3), got(want.size());
        ResizeRgb(src.data(), w, h, want.data(), ow, oh, options, whole_scratch);
        RowResizer resizer;
        resizer.Start(src.data(), w, h, ow, oh, options, band_scratch);
        const size_t stride = static_cast<size_t>(ow) * 3;
        for (int y = 0; y < oh;) {
          const int y_end = std::min(oh, y + 1 + static_cast<int>(rng() % 40));
          const uint8_t* rows = resizer.Rows(y, y_end);
          std::copy(rows, rows + stride * (y_end - y), got.begin() + stride * y);
          y = y_end;
        }
        ASSERT_EQ(want, got) << w << "x" << h << " -> " << ow << "x" << oh
                             << (scalar ? " scalar" : " simd");
      }
    }
  }
}

}  // namespace
}  // namespace stoker::vision
