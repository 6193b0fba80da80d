#include "stoker/codec/exif.h"

#include <cstring>

namespace stoker::codec {

namespace {

constexpr uint16_t kOrientationTag = 0x0112;
constexpr uint16_t kTypeShort = 3;
constexpr uint16_t kTypeLong = 4;
constexpr size_t kIfdEntryBytes = 12;

// Reads TIFF integers in the byte order the TIFF header announces.
struct TiffReader {
  std::span<const uint8_t> tiff;
  bool little_endian;

  bool Has(size_t offset, size_t n) const { return offset <= tiff.size() && n <= tiff.size() - offset; }
  uint16_t U16(size_t o) const {
    return little_endian ? static_cast<uint16_t>(tiff[o] | tiff[o + 1] << 8)
                         : static_cast<uint16_t>(tiff[o] << 8 | tiff[o + 1]);
  }
  uint32_t U32(size_t o) const {
    return little_endian
               ? uint32_t{tiff[o]} | uint32_t{tiff[o + 1]} << 8 | uint32_t{tiff[o + 2]} << 16 |
                     uint32_t{tiff[o + 3]} << 24
               : uint32_t{tiff[o]} << 24 | uint32_t{tiff[o + 1]} << 16 |
                     uint32_t{tiff[o + 2]} << 8 | uint32_t{tiff[o + 3]};
  }
};

int OrientationFromTiff(std::span<const uint8_t> tiff) {
  if (tiff.size() < 8) return 1;
  TiffReader r{tiff, false};
  if (tiff[0] == 'I' && tiff[1] == 'I') {
    r.little_endian = true;
  } else if (!(tiff[0] == 'M' && tiff[1] == 'M')) {
    return 1;
  }
  if (r.U16(2) != 42) return 1;
  const size_t ifd = r.U32(4);
  if (!r.Has(ifd, 2)) return 1;
  const size_t entries = r.U16(ifd);
  for (size_t i = 0; i < entries; ++i) {
    const size_t e = ifd + 2 + i * kIfdEntryBytes;
    if (!r.Has(e, kIfdEntryBytes)) return 1;
    if (r.U16(e) != kOrientationTag) continue;
    const uint16_t type = r.U16(e + 2);
    const uint32_t count = r.U32(e + 4);
    if (count < 1) return 1;
    uint32_t value;
    if (type == kTypeShort) {
      value = r.U16(e + 8);
    } else if (type == kTypeLong) {
      value = r.U32(e + 8);
    } else {
      return 1;
    }
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

}  // namespace

int ReadExifOrientation(std::span<const uint8_t> data) {
  if (data.size() < 4 || data[0] != 0xFF || data[1] != 0xD8) return 1;
  size_t pos = 2;
  while (pos + 4 <= data.size()) {
    if (data[pos] != 0xFF) return 1;
    const uint8_t marker = data[pos + 1];
    if (marker == 0xFF) {
      ++pos;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
      pos += 2;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return 1;  // scan data: no more headers
    const size_t length = static_cast<size_t>(data[pos + 2] << 8 | data[pos + 3]);
    if (length < 2 || pos + 2 + length > data.size()) return 1;
    constexpr uint8_t kApp1 = 0xE1;
    constexpr char kExifHeader[6] = {'E', 'x', 'i', 'f', 0, 0};
    // Pillow keeps the first APP1 segment that starts with "Exif\0\0".
    if (marker == kApp1 && length >= 2 + sizeof(kExifHeader) &&
        std::memcmp(&data[pos + 4], kExifHeader, sizeof(kExifHeader)) == 0) {
      return OrientationFromTiff(data.subspan(pos + 4 + sizeof(kExifHeader),
                                              length - 2 - sizeof(kExifHeader)));
    }
    pos += 2 + length;
  }
  return 1;
}

void ApplyExifOrientation(const uint8_t* src, int width, int height, int channels,
                          int orientation, uint8_t* dst) {
  const bool swap = OrientationSwapsAxes(orientation);
  const int out_w = swap ? height : width;
  const int out_h = swap ? width : height;
  for (int y = 0; y < out_h; ++y) {
    for (int x = 0; x < out_w; ++x) {
      int sx = x, sy = y;  // source pixel of output (x, y)
      switch (orientation) {
        case 2: sx = width - 1 - x; break;                          // FLIP_LEFT_RIGHT
        case 3: sx = width - 1 - x; sy = height - 1 - y; break;     // ROTATE_180
        case 4: sy = height - 1 - y; break;                         // FLIP_TOP_BOTTOM
        case 5: sx = y; sy = x; break;                              // TRANSPOSE
        case 6: sx = y; sy = height - 1 - x; break;                 // ROTATE_270 (clockwise)
        case 7: sx = width - 1 - y; sy = height - 1 - x; break;     // TRANSVERSE
        case 8: sx = width - 1 - y; sy = x; break;                  // ROTATE_90 (counter-clockwise)
        default: break;
      }
      std::memcpy(dst + (static_cast<size_t>(y) * out_w + x) * channels,
                  src + (static_cast<size_t>(sy) * width + sx) * channels, channels);
    }
  }
}

}  // namespace stoker::codec
