#include "stoker/vision/image_processor.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <random>
#include <vector>

namespace stoker::vision {
namespace {

TEST(ImageProcessorTest, FamiliesAndRowLength) {
  auto q2 = ImageProcessor::Make(DefaultProcessorConfig(ModelFamily::kQwen2Vl));
  auto q3 = ImageProcessor::Make(DefaultProcessorConfig(ModelFamily::kQwen3Vl));
  ASSERT_TRUE(q2.ok() && q3.ok());
  EXPECT_EQ(q2->row_length(), 1176);
  EXPECT_EQ(q3->row_length(), 1536);
  EXPECT_EQ(*ParseModelFamily("Qwen2.5_VL"), ModelFamily::kQwen25Vl);
  EXPECT_FALSE(ParseModelFamily("llava").ok());
}

TEST(ImageProcessorTest, PlanGivesGridAndTokens) {
  auto p = ImageProcessor::Make(DefaultProcessorConfig(ModelFamily::kQwen2Vl));
  ASSERT_TRUE(p.ok());
  auto plan = p->Plan(480, 640);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->resized_height, 476);
  EXPECT_EQ(plan->resized_width, 644);
  EXPECT_EQ(plan->grid_h, 34);
  EXPECT_EQ(plan->grid_w, 46);
  EXPECT_EQ(plan->visual_tokens(), 17 * 23);
}

TEST(ImageProcessorTest, PlanRefusesBadImagesBeforeWork) {
  ProcessorConfig c = DefaultProcessorConfig(ModelFamily::kQwen2Vl);
  c.max_source_pixels = 1000;
  auto p = ImageProcessor::Make(c);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->Plan(100, 100).status().code(), StatusCode::kLimitExceeded);
  EXPECT_EQ(p->Plan(0, 10).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p->Plan(1, 201).status().code(), StatusCode::kInvalidArgument);
}

// Normalisation formulas of the two Hugging Face paths (reference spec §8), spot-checked
// on values where they are known to differ in the last bit.
TEST(ImageProcessorTest, NormalizationVariantsFollowTheirFormulas) {
  const double mean = 0.48145466, std = 0.26862954, rf = 1.0 / 255.0;
  int differing = 0;
  for (int v = 0; v < 256; ++v) {
    const auto b = static_cast<uint8_t>(v);
    const float slow = (static_cast<float>(v * rf) - static_cast<float>(mean)) /
                       static_cast<float>(std);
    const float m = static_cast<float>(mean) * 255.0f, s = static_cast<float>(std) * 255.0f;
    const float fast = (static_cast<float>(v) - m) / s;
    EXPECT_EQ(NormalizeSlow(b, rf, mean, std), slow);
    EXPECT_EQ(NormalizeFast(b, rf, mean, std), fast);
    differing += slow != fast;
  }
  EXPECT_GT(differing, 100);  // the spec counts 167 of 256 for this channel
}

// pixel_values layout against a literal transcription of Hugging Face's reshape /
// transpose ([T, C, Hb, m, P, Wb, m, P] -> [Hb, Wb, m, m, C, T, P, P]).
TEST(ImageProcessorTest, PatchLayoutMatchesReshapeTranspose) {
  for (ModelFamily family : {ModelFamily::kQwen2Vl, ModelFamily::kQwen3Vl}) {
    ProcessorConfig c = DefaultProcessorConfig(family);
    c.min_pixels = 0;
    auto p = ImageProcessor::Make(c);
    ASSERT_TRUE(p.ok());
    const int f = static_cast<int>(c.factor());
    const int h = 2 * f, w = 3 * f;  // no resize: the layout alone is tested
    std::mt19937 rng(7);
    std::vector<uint8_t> img(static_cast<size_t>(h) * w * 3);
    for (auto& v : img) v = static_cast<uint8_t>(rng());
    auto plan = p->Plan(h, w);
    ASSERT_TRUE(plan.ok());
    ASSERT_EQ(plan->resized_height, h);
    std::vector<float> out(plan->num_patches() * p->row_length());
    VisionScratch scratch;
    ASSERT_TRUE(p->Run(*plan, img, out, scratch).ok());

    const int P = c.patch_size, m = c.merge_size, T = c.temporal_patch_size;
    const int gh = h / P, gw = w / P, hb = gh / m, wb = gw / m;
    // Naive: build the 9-D index of each output element in the transposed order.
    size_t idx = 0;
    for (int bh = 0; bh < hb; ++bh)
      for (int bw = 0; bw < wb; ++bw)
        for (int mh = 0; mh < m; ++mh)
          for (int mw = 0; mw < m; ++mw)
            for (int ch = 0; ch < 3; ++ch)
              for (int tp = 0; tp < T; ++tp)
                for (int py = 0; py < P; ++py)
                  for (int px = 0; px < P; ++px, ++idx) {
                    const int y = (bh * m + mh) * P + py, x = (bw * m + mw) * P + px;
                    const float want = p->NormalizedValue(ch, img[(y * w + x) * 3 + ch]);
                    ASSERT_EQ(out[idx], want) << "element " << idx;
                  }
    EXPECT_EQ(idx, out.size());
  }
}

// Run (banded resize, patchify, streaming stores for large outputs) against the plain
// composition: whole-image scalar reference resize, then the closed-form layout.
void ExpectRunEqualsWholeImageReference() {
  std::mt19937 rng(11);
  struct Case { int h, w; };
  // Shrinks, grows, one axis only, unchanged, and one large enough (> 4 MiB of
  // output) for the streaming stores.
  const std::vector<Case> cases = {{97, 131}, {30, 500}, {56, 84}, {56, 61}, {45, 84},
                                   {431, 470}};
  for (ResizeBackend backend : {ResizeBackend::kTorchvision, ResizeBackend::kPillow}) {
    for (ModelFamily family : {ModelFamily::kQwen2Vl, ModelFamily::kQwen3Vl}) {
      ProcessorConfig c = DefaultProcessorConfig(family);
      c.min_pixels = 0;
      c.backend = backend;
      auto p = ImageProcessor::Make(c);
      ASSERT_TRUE(p.ok());
      VisionScratch scratch;
      for (const Case& k : cases) {
        SCOPED_TRACE(testing::Message() << k.w << "x" << k.h << " backend "
                                        << static_cast<int>(backend));
        std::vector<uint8_t> img(static_cast<size_t>(k.h) * k.w * 3);
        for (auto& v : img) v = static_cast<uint8_t>(rng() % 7 == 0 ? 255 * (rng() % 2) : rng());
        auto plan = p->Plan(k.h, k.w);
        ASSERT_TRUE(plan.ok());
        const int rh = static_cast<int>(plan->resized_height);
        const int rw = static_cast<int>(plan->resized_width);
        std::vector<uint8_t> resized(static_cast<size_t>(rh) * rw * 3);
        ResizeScratch rs;
        ResizeOptions options{backend, c.pillow_order, /*force_scalar=*/true};
        ResizeRgb(img.data(), k.w, k.h, resized.data(), rw, rh, options, rs);
        std::vector<float> out(plan->num_patches() * p->row_length());
        ASSERT_TRUE(p->Run(*plan, img, out, scratch).ok());
        const int P = c.patch_size, m = c.merge_size, T = c.temporal_patch_size;
        const int wb = rw / P / m;
        size_t idx = 0;
        for (int r = 0; r < plan->num_patches(); ++r) {
          const int mw = r % m, mh = (r / m) % m, bw = (r / m / m) % wb, bh = r / m / m / wb;
          for (int ch = 0; ch < 3; ++ch)
            for (int tp = 0; tp < T; ++tp)
              for (int py = 0; py < P; ++py)
                for (int px = 0; px < P; ++px, ++idx) {
                  const int y = (bh * m + mh) * P + py, x = (bw * m + mw) * P + px;
                  const float want = p->NormalizedValue(ch, resized[(y * rw + x) * 3 + ch]);
                  ASSERT_EQ(out[idx], want) << "element " << idx;
                }
        }
        EXPECT_EQ(idx, out.size());
      }
    }
  }
}

TEST(ImageProcessorTest, RunEqualsWholeImageReference) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    SCOPED_TRACE(testing::Message() << "Highway target " << hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    ExpectRunEqualsWholeImageReference();
  }
  hwy::SetSupportedTargetsForTest(0);
}

// The SIMD normalisation formula is exact (checked on all 256 values) for the shipped
// configurations of both paths, so they never fall back to the lookup table.
TEST(ImageProcessorTest, NormalizeFormulaIsExactForPublishedConfigs) {
  for (ModelFamily family : {ModelFamily::kQwen2Vl, ModelFamily::kQwen25Vl,
                             ModelFamily::kQwen3Vl}) {
    for (ResizeBackend backend : {ResizeBackend::kTorchvision, ResizeBackend::kPillow}) {
      ProcessorConfig c = DefaultProcessorConfig(family);
      c.backend = backend;
      auto p = ImageProcessor::Make(c);
      ASSERT_TRUE(p.ok());
      EXPECT_TRUE(p->normalize_formula_exact())
          << ModelFamilyName(family) << " backend " << static_cast<int>(backend);
    }
  }
}

// The vector kernel computes NormalizeFormula::Apply bit for bit, with and without the
// rescale division, on every byte value: an image whose 16 x 16 patch rows hold all
// 256 values of each channel (shifted per channel).
TEST(ImageProcessorTest, PatchKernelComputesTheScalarFormula) {
  constexpr int p = 16, m = 1, t = 2;
  std::vector<uint8_t> band(static_cast<size_t>(p) * p * 3);
  for (int i = 0; i < p * p; ++i) {
    for (int c = 0; c < 3; ++c) band[i * 3 + c] = static_cast<uint8_t>(i + 85 * c);
  }
  for (float divisor : {1.0f, 255.0f}) {
    NormalizeFormula f;
    f.divisor = divisor;
    f.mean = {0.48145466f, 0.4578275f, 0.40821073f};
    f.std = {0.26862954f, 0.26130258f, 0.27577711f};
    if (divisor == 1.0f) {
      for (int c = 0; c < 3; ++c) f.mean[c] *= 255.0f, f.std[c] *= 255.0f;
    }
    std::vector<float> out(static_cast<size_t>(3) * t * p * p, -1.0f);
    std::vector<float> row(out.size());
    if (!WritePatchRowsSimd(band.data(), p * 3, 1, m, p, t, f, out.data(),
                            /*stream=*/false, row.data())) {
      GTEST_SKIP() << "no 256-bit SIMD on this CPU";
    }
    for (int c = 0; c < 3; ++c) {
      for (int tp = 0; tp < t; ++tp) {
        for (int i = 0; i < p * p; ++i) {
          const float want = f.Apply(c, band[i * 3 + c]);
          ASSERT_EQ(out[(c * t + tp) * p * p + i], want)
              << "channel " << c << " byte " << int{band[i * 3 + c]} << " divisor "
              << divisor;
        }
      }
    }
  }
}

TEST(ImageProcessorTest, RunChecksBufferSizes) {
  auto p = ImageProcessor::Make(DefaultProcessorConfig(ModelFamily::kQwen2Vl));
  ASSERT_TRUE(p.ok());
  auto plan = p->Plan(56, 56);
  ASSERT_TRUE(plan.ok());
  std::vector<uint8_t> img(56 * 56 * 3);
  std::vector<float> out(1);
  VisionScratch scratch;
  EXPECT_EQ(p->Run(*plan, img, out, scratch).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoker::vision
