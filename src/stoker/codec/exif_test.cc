#include "stoker/codec/exif.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace stoker::codec {
namespace {

// A minimal JPEG header: SOI + APP1 "Exif" with one IFD0 entry (Orientation), then EOI.
std::vector<uint8_t> JpegWithOrientation(int orientation, bool little_endian) {
  std::vector<uint8_t> tiff;
  auto u16 = [&](int v) {
    if (little_endian) {
      tiff.push_back(v & 0xFF);
      tiff.push_back(v >> 8);
    } else {
      tiff.push_back(v >> 8);
      tiff.push_back(v & 0xFF);
    }
  };
  auto u32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) {
      const int shift = little_endian ? 8 * i : 8 * (3 - i);
      tiff.push_back(static_cast<uint8_t>(v >> shift));
    }
  };
  tiff.push_back(little_endian ? 'I' : 'M');
  tiff.push_back(little_endian ? 'I' : 'M');
  u16(42);
  u32(8);
  u16(1);          // one entry
  u16(0x0112);     // Orientation
  u16(3);          // SHORT
  u32(1);
  u16(orientation);
  u16(0);
  u32(0);          // no next IFD
  std::vector<uint8_t> jpeg = {0xFF, 0xD8, 0xFF, 0xE1};
  const size_t length = 2 + 6 + tiff.size();
  jpeg.push_back(static_cast<uint8_t>(length >> 8));
  jpeg.push_back(static_cast<uint8_t>(length & 0xFF));
  for (char c : {'E', 'x', 'i', 'f', '\0', '\0'}) jpeg.push_back(static_cast<uint8_t>(c));
  jpeg.insert(jpeg.end(), tiff.begin(), tiff.end());
  jpeg.push_back(0xFF);
  jpeg.push_back(0xD9);
  return jpeg;
}

TEST(ExifTest, ReadsOrientationInBothByteOrders) {
  for (int o = 1; o <= 8; ++o) {
    EXPECT_EQ(ReadExifOrientation(JpegWithOrientation(o, true)), o);
    EXPECT_EQ(ReadExifOrientation(JpegWithOrientation(o, false)), o);
  }
  EXPECT_EQ(ReadExifOrientation(JpegWithOrientation(9, true)), 1);  // invalid: ignored
  const std::vector<uint8_t> no_exif = {0xFF, 0xD8, 0xFF, 0xD9};
  EXPECT_EQ(ReadExifOrientation(no_exif), 1);
  std::vector<uint8_t> truncated = JpegWithOrientation(6, true);
  truncated.resize(14);
  EXPECT_EQ(ReadExifOrientation(truncated), 1);
}

TEST(ExifTest, TransposesLikePil) {
  // 3 x 2 single-channel image:  a b c / d e f
  const std::vector<uint8_t> src = {'a', 'b', 'c', 'd', 'e', 'f'};
  auto apply = [&](int o) {
    std::vector<uint8_t> dst(6);
    ApplyExifOrientation(src.data(), 3, 2, 1, o, dst.data());
    return std::string(dst.begin(), dst.end());
  };
  EXPECT_EQ(apply(1), "abcdef");
  EXPECT_EQ(apply(2), "cbafed");  // FLIP_LEFT_RIGHT
  EXPECT_EQ(apply(3), "fedcba");  // ROTATE_180
  EXPECT_EQ(apply(4), "defabc");  // FLIP_TOP_BOTTOM
  EXPECT_EQ(apply(5), "adbecf");  // TRANSPOSE -> 2 x 3: ad / be / cf
  EXPECT_EQ(apply(6), "daebfc");  // ROTATE_270 (clockwise): da / eb / fc
  EXPECT_EQ(apply(7), "fcebda");  // TRANSVERSE: fc / eb / da
  EXPECT_EQ(apply(8), "cfbead");  // ROTATE_90 (counter-clockwise): cf / be / ad
}

}  // namespace
}  // namespace stoker::codec
