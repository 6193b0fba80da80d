#include "stoker/codec/image_decoder.h"

#include <gtest/gtest.h>
#include <png.h>

#include <cstdlib>

#include "test_images.h"

namespace stoker::codec {
namespace {

using namespace stoker::testing;

struct Decoded {
  Status status;
  std::vector<uint8_t> rgb;
  int width = 0, height = 0;
};

Decoded Decode(const Bytes& bytes, int64_t max_pixels = kDefaultMaxImagePixels) {
  auto pool = BufferPool::Make(1 << 24);
  DecodeOptions options;
  options.max_pixels = max_pixels;
  Result<DecodedImage> image = DecodeImage(bytes, options, *pool);
  Decoded out;
  out.status = image.status();
  if (image.ok()) {
    out.rgb.assign(image->pixels.data(), image->pixels.data() + image->pixels.size());
    out.width = image->width;
    out.height = image->height;
  }
  return out;
}

TEST(ImageDecoderTest, SniffsFormats) {
  EXPECT_EQ(SniffFormat(EncodeJpeg(MakeRgb(8, 8, 1), 8, 8, 90)), ImageFormat::kJpeg);
  EXPECT_EQ(SniffFormat(PngHeaderOnly(1, 1)), ImageFormat::kPng);
  EXPECT_EQ(SniffFormat(EncodeWebpLossless(MakeRgb(4, 4, 1), 4, 4)), ImageFormat::kWebp);
  EXPECT_EQ(SniffFormat(Bytes{'G', 'I', 'F', '8', '9', 'a'}), ImageFormat::kUnknown);
  EXPECT_EQ(SniffFormat(Bytes{}), ImageFormat::kUnknown);
}

TEST(ImageDecoderTest, PngRgbRoundTripsExactly) {
  for (auto [w, h] : {std::pair{1, 1}, {17, 9}, {3, 200}, {257, 130}}) {
    auto rgb = MakeRgb(w, h, static_cast<uint32_t>(w * 31 + h));
    Decoded d = Decode(EncodePng(rgb, w, h, PNG_COLOR_TYPE_RGB, 8));
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_EQ(d.width, w);
    EXPECT_EQ(d.height, h);
    EXPECT_EQ(d.rgb, rgb);
  }
}

TEST(ImageDecoderTest, PngModesConvertLikePillow) {
  const int w = 5, h = 3;
  // RGBA: alpha dropped, no compositing.
  std::vector<uint8_t> rgba(w * h * 4);
  for (size_t i = 0; i < rgba.size(); ++i) rgba[i] = static_cast<uint8_t>(i * 37);
  Decoded d = Decode(EncodePng(rgba, w, h, PNG_COLOR_TYPE_RGBA, 8));
  ASSERT_TRUE(d.status.ok());
  for (int p = 0; p < w * h; ++p) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(d.rgb[p * 3 + c], rgba[p * 4 + c]);
  }
  // 8-bit grey: replicated.
  std::vector<uint8_t> grey(w * h);
  for (size_t i = 0; i < grey.size(); ++i) grey[i] = static_cast<uint8_t>(i * 17);
  d = Decode(EncodePng(grey, w, h, PNG_COLOR_TYPE_GRAY, 8));
  ASSERT_TRUE(d.status.ok());
  for (int p = 0; p < w * h; ++p) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(d.rgb[p * 3 + c], grey[p]);
  }
  // 16-bit grey: Pillow's I;16 -> RGB gives 255 when the high byte is set, else the low byte.
  std::vector<uint8_t> grey16 = {0x00, 0x05, 0x00, 0xFF, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x80};
  d = Decode(EncodePng(grey16, 5, 1, PNG_COLOR_TYPE_GRAY, 16));
  ASSERT_TRUE(d.status.ok());
  const uint8_t expect16[] = {5, 255, 255, 255, 128};
  for (int p = 0; p < 5; ++p) EXPECT_EQ(d.rgb[p * 3], expect16[p]) << p;
  // 16-bit RGB: high bytes.
  std::vector<uint8_t> rgb16 = {0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC};
  d = Decode(EncodePng(rgb16, 1, 1, PNG_COLOR_TYPE_RGB, 16));
  ASSERT_TRUE(d.status.ok());
  EXPECT_EQ(d.rgb, (std::vector<uint8_t>{0x12, 0x56, 0x9A}));
  // Palette: lookup.
  std::vector<uint8_t> palette = {10, 20, 30, 40, 50, 60};
  std::vector<uint8_t> indices = {1, 0, 1};
  d = Decode(EncodePng(indices, 3, 1, PNG_COLOR_TYPE_PALETTE, 8, palette));
  ASSERT_TRUE(d.status.ok());
  EXPECT_EQ(d.rgb, (std::vector<uint8_t>{40, 50, 60, 10, 20, 30, 40, 50, 60}));
  // 1-bit grey: 0 / 255.
  std::vector<uint8_t> bits = {0b10100000};
  d = Decode(EncodePng(bits, 3, 1, PNG_COLOR_TYPE_GRAY, 1));
  ASSERT_TRUE(d.status.ok());
  EXPECT_EQ(d.rgb, (std::vector<uint8_t>{255, 255, 255, 0, 0, 0, 255, 255, 255}));
}

TEST(ImageDecoderTest, JpegDecodesCloseToTheSource) {
  const int w = 64, h = 48;
  auto rgb = MakeRgb(w, h, 5);
  Bytes jpeg = EncodeJpeg(rgb, w, h, 95);
  auto info = ProbeImage(jpeg);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->width, w);
  EXPECT_EQ(info->height, h);
  Decoded d = Decode(jpeg);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  double error = 0;
  for (size_t i = 0; i < rgb.size(); ++i) error += std::abs(int(rgb[i]) - int(d.rgb[i]));
  EXPECT_LT(error / rgb.size(), 12.0);  // lossy, but the same picture
  // Exact parity with Pillow is tested in tests/python/test_codec.py.
}

TEST(ImageDecoderTest, WebpLosslessRoundTripsExactly) {
  auto rgb = MakeRgb(33, 21, 9);
  Decoded d = Decode(EncodeWebpLossless(rgb, 33, 21));
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.rgb, rgb);
}

TEST(ImageDecoderTest, HugeHeaderIsRefusedBeforeAllocating) {
  auto pool = BufferPool::Make(1 << 20);
  Result<DecodedImage> image = DecodeImage(PngHeaderOnly(100000, 100000), {}, *pool);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kLimitExceeded);
  EXPECT_NE(image.status().message().find("100000x100000"), std::string::npos);
  EXPECT_EQ(pool->stats().acquired, 0) << "no pixel memory may be taken";
  // A small explicit limit applies to ordinary images too, and <= 0 disables it.
  auto rgb = MakeRgb(20, 10, 1);
  Bytes png = EncodePng(rgb, 20, 10, PNG_COLOR_TYPE_RGB, 8);
  EXPECT_EQ(Decode(png, 199).status.code(), StatusCode::kLimitExceeded);
  EXPECT_TRUE(Decode(png, 200).status.ok());
  EXPECT_TRUE(Decode(png, 0).status.ok());
}

TEST(ImageDecoderTest, DamagedInputsGiveTypedErrors) {
  auto rgb = MakeRgb(40, 30, 3);
  Bytes jpeg = EncodeJpeg(rgb, 40, 30, 90);
  Bytes png = EncodePng(rgb, 40, 30, PNG_COLOR_TYPE_RGB, 8);
  Bytes webp = EncodeWebpLossless(rgb, 40, 30);

  Decoded d = Decode(Bytes{});
  EXPECT_EQ(d.status.code(), StatusCode::kUnsupportedImage);
  EXPECT_NE(d.status.message().find("empty file"), std::string::npos);

  d = Decode(Bytes{'G', 'I', 'F', '8', '9', 'a', 0, 0});
  EXPECT_EQ(d.status.code(), StatusCode::kUnsupportedImage);
  EXPECT_NE(d.status.message().find("GIF"), std::string::npos);

  d = Decode(Bytes(jpeg.begin(), jpeg.begin() + jpeg.size() / 2));
  EXPECT_EQ(d.status.code(), StatusCode::kCorruptImage);
  EXPECT_NE(d.status.message().find("truncated"), std::string::npos) << d.status.message();

  d = Decode(Bytes(jpeg.begin(), jpeg.begin() + 10));
  EXPECT_EQ(d.status.code(), StatusCode::kCorruptImage);

  d = Decode(Bytes(png.begin(), png.begin() + png.size() / 2));
  EXPECT_EQ(d.status.code(), StatusCode::kCorruptImage);
  EXPECT_NE(d.status.message().find("truncated"), std::string::npos) << d.status.message();

  Bytes bad_crc = png;
  bad_crc[29] ^= 0xFF;  // the IHDR CRC (bytes 29..32)
  d = Decode(bad_crc);
  EXPECT_EQ(d.status.code(), StatusCode::kCorruptImage);
  EXPECT_NE(d.status.message().find("CRC"), std::string::npos) << d.status.message();

  d = Decode(Bytes(webp.begin(), webp.begin() + webp.size() / 2));
  EXPECT_EQ(d.status.code(), StatusCode::kCorruptImage);

  Bytes zero_size = PngHeaderOnly(0, 10);
  d = Decode(zero_size);
  EXPECT_EQ(d.status.code(), StatusCode::kCorruptImage);
  EXPECT_NE(d.status.message().find("0x10"), std::string::npos) << d.status.message();
}

TEST(ImageDecoderTest, DecodeIntoChecksTheBufferSize) {
  auto rgb = MakeRgb(4, 4, 1);
  Bytes png = EncodePng(rgb, 4, 4, PNG_COLOR_TYPE_RGB, 8);
  ImageInfo info = *ProbeImage(png);
  std::vector<uint8_t> small(10);
  EXPECT_EQ(DecodeImageInto(png, info, small).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoker::codec
